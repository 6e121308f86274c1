"""`--metrics-auth`, the same for `airlock serve` and `airlock controller`."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Literal, get_args

Mode = Literal["kubernetes", "none"]
MODES: tuple[Mode, ...] = get_args(Mode)


def add_metrics_auth_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-auth", choices=MODES, default=None,
        help="who may read /metrics: `kubernetes`, a bearer token the apiserver "
             "authenticates (TokenReview) and allows to get /metrics (SubjectAccessReview); "
             "`none`, anyone who reaches the port. Default: kubernetes in a pod or with "
             "--kubeconfig, none otherwise (a laptop with no cluster)")


def metrics_auth(given: Mode | None, kubeconfig: Path | None) -> Mode:
    """The mode asked for; by default, `kubernetes` wherever there is an apiserver to ask
    (in a pod, or given a kubeconfig), so an install is never open by omission, and
    `none` elsewhere, so `airlock serve` still runs on a laptop with no cluster."""
    if given is not None:
        return given
    if kubeconfig is not None:
        return "kubernetes"
    from webhook.kubeclient import in_cluster

    return "kubernetes" if in_cluster() else "none"
