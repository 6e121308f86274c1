"""`--metrics-auth`, the same for `airlock serve` and `airlock controller`."""

from __future__ import annotations

import argparse

from webhook.reach import MODES, Mode

__all__ = ["MODES", "Mode", "add_metrics_auth_argument"]


def add_metrics_auth_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-auth", choices=MODES, default=None,
        help="who may read /metrics: `kubernetes`, a bearer token the apiserver "
             "authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview); "
             "`none`, anyone who reaches the port. Default: kubernetes in a pod or with "
             "--kubeconfig, none otherwise (a laptop with no cluster)")

