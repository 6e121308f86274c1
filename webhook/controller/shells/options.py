"""Command-line options of `airlock controller`."""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from webhook.controller.core.placement.pins import PIN_MODES
from webhook.metricsauth.options import add_metrics_auth_argument


def add_controller_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--policies", type=Path, default=Path("policies"),
                        help="the policy directory the webhook reads (its accelerators are "
                             "what the controller counts); reloaded when it changes")
    parser.add_argument("--namespace", default="airlock-system",
                        help="namespace of the leader-election Lease")
    parser.add_argument("--lease-name", default="airlock-controller")
    parser.add_argument("--no-leader-election", action="store_true",
                        help="act at once, without a Lease (one replica only)")
    parser.add_argument("--identity", default=f"{socket.gethostname()}-{os.getpid()}",
                        help="this replica's name in the Lease")
    parser.add_argument("--metrics-port", type=int, default=8080,
                        help="HTTPS port for /metrics and /healthz (0 to disable)")
    add_metrics_auth_argument(parser)
    parser.add_argument("--metrics-cert-dir", type=Path, default=None,
                        help="directory with tls.crt and tls.key for the metrics port, read "
                             "at start (default: a self-signed certificate made at start)")
    parser.add_argument("--order", choices=("strict", "backfill"), default="backfill",
                        help="strict: the head gang blocks all behind it; backfill: smaller "
                             "gangs may start if they leave the head's domain alone")
    parser.add_argument("--reservation-timeout", type=float, default=120.0,
                        help="seconds an ungated but unbound pod keeps its capacity reserved")
    parser.add_argument("--pin", choices=PIN_MODES, default="nodes",
                        help="nodes: pin each pod let go to the node its gang's plan gave it; "
                             "domain: only to its domain, kube-scheduler choosing the node")
    parser.add_argument("--incomplete-warning-after", type=float, default=300.0,
                        help="seconds before a gang with missing members gets a Warning event")
    parser.add_argument("--forecast-resolution", type=_seconds, default=15.0,
                        help="seconds within which predicted starts take expected ends as "
                             "one (docs/predictions.md)")
    parser.add_argument("--patch-pause", type=float, default=0.0, help=argparse.SUPPRESS)


def _seconds(text: str) -> float:
    """A number of seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: seconds must be 0 or more, and finite")
    return value
