"""Command-line options of `airlock sandbox`."""

from __future__ import annotations

import argparse
from pathlib import Path

from webhook.pools import pools_argument
from webhook.sandbox.binaries import (
    DEFAULT_RELEASE,
    KUBERNETES_ENV,
    RELEASES,
    Release,
    UnknownRelease,
    kubernetes_release,
)
from webhook.sandbox.nodes import UNIFORM, mig_profiles
from webhook.sandbox.operators import (
    AUTOSCALERS,
    OPERATORS,
    Operator,
    UnknownOperator,
    select,
)
from webhook.sandbox.processes import RESTARTABLE


def _mig(text: str) -> tuple[tuple[str, int], ...]:
    try:
        return mig_profiles(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _release(text: str) -> Release:
    try:
        return kubernetes_release(text)
    except UnknownRelease as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _operators(spec: str) -> list[Operator]:
    try:
        return select(spec)
    except UnknownOperator as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def add_sandbox_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("up", "down", "status", "restart"))
    parser.add_argument("component", nargs="?", choices=tuple(RESTARTABLE),
                        help="with restart: the process to stop and start again in place, "
                             "keeping its flags, ports and data")
    parser.add_argument("--state-dir", type=Path, default=None,
                        help="where the sandbox keeps its files (default: "
                             "~/.cache/airlock/sandbox)")
    parser.add_argument("--nodes", type=int, default=UNIFORM["nodes"], help="fake GPU nodes")
    parser.add_argument("--gpus-per-node", type=int, default=UNIFORM["gpus_per_node"])
    parser.add_argument("--nodes-per-domain", type=int, default=UNIFORM["nodes_per_domain"],
                        help="nodes per NVLink domain (nvidia.com/gpu.clique)")
    parser.add_argument("--domains-per-block", type=int,
                        default=UNIFORM["domains_per_block"],
                        help="NVLink domains per block (cloud.google.com/gce-topology-block)")
    parser.add_argument("--pools", type=pools_argument, default=(), metavar="SPEC|FILE",
                        help="node pools in place of the uniform flags above: "
                             "MODEL=NODESxGPUS[/NODES_PER_DOMAIN],... (e.g. "
                             "h100=8x8/4,l4=4x1; models: b200, h200, h100, a100, l40s, l4) "
                             "or a YAML/JSON file of pools (docs/sandbox.md)")
    parser.add_argument("--mig", type=_mig, default=(), metavar="PROFILE=COUNT,...",
                        help="also make --mig-nodes MIG nodes (mixed strategy), each "
                             "advertising these slices, e.g. 1g.10gb=7 or 3g.40gb=2,1g.10gb=1")
    parser.add_argument("--mig-nodes", type=int, default=2)
    parser.add_argument("--dra", action="store_true",
                        help="offer the nodes' GPUs only as DRA devices: ResourceSlices of "
                             "NVIDIA's driver (gpu.nvidia.com, compute-domain.nvidia.com) and "
                             "its DeviceClasses, no nvidia.com/gpu")
    parser.add_argument("--kubernetes", type=_release, default=None, metavar="MINOR",
                        help=f"with up: the Kubernetes release to run ({', '.join(RELEASES)}; "
                             f"default: ${KUBERNETES_ENV}, else {DEFAULT_RELEASE.minor}), "
                             "built on first use")
    parser.add_argument("--autoscaler", choices=sorted(AUTOSCALERS), default=None,
                        help="with up: run this autoscaler, which grows the cluster from "
                             "the --nodes static ones (docs/autoscaling.md)")
    parser.add_argument("--demo", action="store_true",
                        help="create the example workloads and show what happened to them")
    parser.add_argument("--operators", type=_operators, default=[],
                        help="with up: also run these real operators, built from their Go "
                             f"modules (comma-separated: {', '.join(OPERATORS)}, or all); "
                             "--demo runs training-operator, for PyTorchJobs only unless "
                             "named here")
    parser.add_argument("--policies", type=Path, default=Path("policies"))
    parser.add_argument("--settle", type=float, default=30.0,
                        help="with --demo: at most this many seconds for every pod to land "
                             "before the table is printed")
