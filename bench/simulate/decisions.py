"""Whether two versions of the core decide alike on `bench.simulate`'s trace: a speed-up
must change no decision. Writes one line per controller round (its clock and a digest of
its actions, in order) and one per job (a digest of its timeline), so two files compare
line by line, and the first line that differs names the round or the job.

    PYTHONHASHSEED=0 .venv/bin/python bench/simulate/decisions.py --nodes 3000 -o head.txt
    cd ../other-checkout && PYTHONHASHSEED=0 ../this/.venv/bin/python \\
        ../this/bench/simulate/decisions.py --nodes 3000 -o base.txt --against head.txt

Run as a file, it imports `webhook` from the checkout it is run in (the working
directory), so the same script checks another commit. A wait is digested by its unit,
reason, message, flags, pod count and first pod (its pods' whole records would make the
digest the run's cost); every other action whole.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from pathlib import Path

sys.path.insert(0, os.getcwd())

from webhook.controller.core.actions import Action, Wait
from webhook.controller.core.rounds import Rounds
from webhook.policy.loading import load_policy
from webhook.simulation.clusters import Shape
from webhook.simulation.generating import Mix, generate
from webhook.simulation.simulating import simulate


def _said(action: Action) -> str:
    if isinstance(action, Wait):
        first = action.pods[0].key if action.pods else None
        return repr((action.unit, action.reason, action.message, action.warning,
                     action.may_grow, action.reserves, len(action.pods), first))
    return repr(action)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def record(args: argparse.Namespace) -> list[str]:
    """Every round's digest, then every job's."""
    base = Mix()
    mix = Mix(jobs=args.jobs, seconds=24 * 3600, seed=1, max_pods=128,
              medians={c: m * 4.0 for c, m in base.medians.items()})
    lines: list[str] = []
    run_round = Rounds.run

    def recorded(self: Rounds, *a: object, **k: object) -> list[Action]:
        actions = run_round(self, *a, **k)  # type: ignore[arg-type]
        lines.append(f"round {a[2]} {len(actions)} "
                     f"{_digest(''.join(_said(x) for x in actions))}")
        return actions

    Rounds.run = recorded  # type: ignore[method-assign]
    run = simulate(generate(mix), load_policy(Path.cwd() / "policies"),
                   Shape(args.nodes, 8, 32), "airlock")
    lines.extend(f"job {t.name} {_digest(repr(t))}" for t in run.timelines)
    return lines


def main() -> int:
    p = argparse.ArgumentParser(prog="bench/simulate/decisions.py")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("-o", "--out", type=Path, required=True)
    p.add_argument("--against", type=Path, help="a file an earlier run wrote, to compare")
    args = p.parse_args()
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("set PYTHONHASHSEED=0: set order must not differ between the runs")
        return 2
    lines = record(args)
    args.out.write_text("".join(f"{line}\n" for line in lines))
    rounds = sum(1 for line in lines if line.startswith("round"))
    print(f"{rounds} rounds, {len(lines) - rounds} jobs: {args.out}")
    if args.against is None:
        return 0
    other = args.against.read_text().splitlines()
    for n, (mine, theirs) in enumerate(zip(lines, other, strict=False), 1):
        if mine != theirs:
            print(f"line {n} differs: {mine!r} here, {theirs!r} in {args.against}")
            return 1
    if len(lines) != len(other):
        print(f"{len(lines)} lines here, {len(other)} in {args.against}")
        return 1
    print(f"identical to {args.against}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
