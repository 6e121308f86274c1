"""`kubectl airlock`: the command line of the krew plugin (the `kubectl-airlock`
executable, which kubectl finds on PATH). Flags are kubectl's where kubectl has them
(`--kubeconfig`, `--context`, `-n/--namespace`, `--request-timeout`, `-o`) and may come
before or after the subcommand. Every failure is one line on stderr and exit code 1."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

PROG = "kubectl airlock"


def _common(parser: argparse.ArgumentParser, top: bool) -> None:
    # On the subcommands the defaults are left out, so a flag given before the
    # subcommand is not undone by its absence after it.
    default = (lambda value: value) if top else (lambda _: argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", type=Path, default=default(None),
                        help="kubeconfig file (default: KUBECONFIG, else ~/.kube/config)")
    parser.add_argument("--context", default=default(None),
                        help="the kubeconfig context to use (default: its current one)")
    parser.add_argument("-n", "--namespace", default=default(None),
                        help="namespace of the pod or workload `why` names (default: the "
                             "context's)")
    parser.add_argument("--policies", type=Path, default=default(None), metavar="DIR",
                        help="read the policy from DIR instead of the cluster's ConfigMap "
                             "airlock-system/airlock-policies")
    parser.add_argument("--request-timeout", type=float, default=default(60.0),
                        metavar="SECONDS", help="give up on the apiserver after this long")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description="Airlock's view of the cluster, read with your kubeconfig: "
        "queues, waiting gangs and why, and what admission does to a workload.")
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True)
    commands = (
        ("status", "queues, waiting gangs and why, recent preemptions (as `airlock status`)"),
        ("queues", "each queue's quota, use and borrowing, per GPU model where policy names "
                   "models, and what waits in it"),
        ("why", "why a pod or a workload's gang waits: its queue, reason, blockers and what "
                "would let it start; or why Airlock does not govern it"),
        ("explain", "what admission would do to the pods of Pods and workloads in files, "
                    "under the cluster's policy (as `airlock explain`)"),
    )
    for name, summary in commands:
        command = sub.add_parser(name, help=summary, description=summary)
        _common(command, top=False)
        if name == "why":
            command.add_argument("target", metavar="POD|KIND/NAME",
                                 help="a pod, or a workload: deployment/NAME, job/NAME, "
                                      "pytorchjob/NAME, jobset/NAME, raycluster/NAME, ...")
        if name == "explain":
            command.add_argument("-f", "--filename", dest="file", action="append",
                                 required=True, type=Path,
                                 help="YAML or JSON file of Pods and workloads; repeatable; "
                                      "- for stdin")
            command.add_argument("--strict", action="store_true",
                                 help="fail on an object of a kind explain does not know")
        command.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # What the controller's shells log as they read (a record they could not read, say)
    # is no business of this command's output.
    logging.getLogger("airlock").setLevel(logging.ERROR)
    from webhook.plugin.running import Failure, run

    try:
        return asyncio.run(run(args))
    except Failure as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
