"""`python -m webhook.sandbox.building`: the Go tools the sandbox and the tests run, built
(or taken from the cache) ahead, so the first test or `airlock sandbox up` does not stop
for minutes of building, and building first says how long it takes.

    python -m webhook.sandbox.building                    # Kubernetes (with etcd), KWOK
    python -m webhook.sandbox.building --kubernetes 1.37  # another release's
    python -m webhook.sandbox.building --operators all    # and the operators
    python -m webhook.sandbox.building --helm             # and Helm (deploy/helm's tests)
    python -m webhook.sandbox.building --autoscaler karpenter   # and Karpenter's kwok one

A command of its own, on top of the modules that declare and build the tools: they never
import it, so what it builds can grow without one of them reaching back up. bench.peers'
peers are the benches' own (`python -m bench.peers --build`).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from webhook.sandbox.binaries import (
    DEFAULT_RELEASE,
    KUBERNETES_ENV,
    RELEASES,
    UnknownRelease,
    ensure_binaries,
    ensure_helm,
    kubernetes_release,
)
from webhook.sandbox.gobuilding import BuildError
from webhook.sandbox.operating import build_operators
from webhook.sandbox.operators import AUTOSCALERS, UnknownOperator, select


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m webhook.sandbox.building",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubernetes", default=None, metavar="MINOR",
                        help=f"the Kubernetes release ({', '.join(RELEASES)}; default: "
                             f"${KUBERNETES_ENV}, else {DEFAULT_RELEASE.minor})")
    parser.add_argument("--operators", default="", metavar="NAMES",
                        help="also build these operators (comma-separated, or all)")
    parser.add_argument("--autoscaler", choices=sorted(AUTOSCALERS), default=None,
                        help="also build this autoscaler (`sandbox up --autoscaler`)")
    parser.add_argument("--helm", action="store_true",
                        help="also build helm (the chart's tests need it)")
    args = parser.parse_args(argv)
    try:
        binaries = ensure_binaries(_progress, kubernetes_release(args.kubernetes))
        chosen = select(args.operators) if args.operators else []
        chosen += [AUTOSCALERS[args.autoscaler]] if args.autoscaler else []
        operators = build_operators(chosen, _progress) if chosen else []
        helm = ensure_helm(_progress) if args.helm else None
    except (BuildError, UnknownOperator, UnknownRelease) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for field in dataclasses.fields(binaries):
        print(f"{field.name.replace('_', '-')}: {getattr(binaries, field.name)}")
    if helm is not None:
        print(f"helm: {helm}")
    for op in operators:
        print(f"operator {op.name}: built")
    return 0


if __name__ == "__main__":
    sys.exit(main())
