"""Predicted starts against real ones in `airlock simulate`, with the run times the
forecast is told made exact, one source of error at a time:

- `as written`: the trace as it is;
- `stated exact`: the jobs that state a run time (`expectedRuntime`) state exactly how
  long they run, the others still state none;
- `all exact`: every job states exactly how long it runs.

What is left with every run time exact is the forecast's own model of the rounds (the
order kept, the bounds on its cost, elastic gangs, preemption) and what arrives later.
Backfill reads stated run times too, so each variant is a schedule of its own; each is
deterministic.

    .venv/bin/python -m bench.predictions [--trace FILE|family:SEEDS ...] [--policies DIR]
        [-o json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.peers.family import Member, members
from webhook.policy.loading import load_policy
from webhook.policy.model import Policy
from webhook.simulation.clusters import Shape
from webhook.simulation.forecasts import accuracy
from webhook.simulation.simulating import simulate
from webhook.simulation.traces import Job

ROOT = Path(__file__).resolve().parents[2]
TRACES = ("bench/traces/contended.jsonl", "bench/traces/shaped.jsonl")


def _stated_exact(job: Job) -> Job:
    if job.expected_runtime is None:
        return job
    return dataclasses.replace(job, expected_runtime=job.runtime)


def _all_exact(job: Job) -> Job:
    return dataclasses.replace(job, expected_runtime=job.runtime)


VARIANTS: dict[str, Callable[[Job], Job]] = {
    "as written": lambda job: job,
    "stated exact": _stated_exact,
    "all exact": _all_exact,
}


def measure(jobs: Sequence[Job], policy: Policy) -> dict[str, dict[str, Any]]:
    """Each variant's prediction figures (`forecasts.accuracy`) on `jobs`."""
    found = {}
    for name, told in VARIANTS.items():
        run = simulate([told(j) for j in jobs], policy, Shape(), "airlock", predictions=True)
        found[name] = accuracy(run.timelines)
    return found


def _share(figures: dict[str, Any]) -> str:
    """The median error as a share of the wait (known predictions / gangs that waited)."""
    share = figures["medianErrorShareOfWait"]
    known = f"{figures['predicted']}/{figures['waitedLong']}"
    return f"- ({known})" if share is None else f"{share:.1%} ({known})"


def _row(label: str, found: dict[str, dict[str, Any]]) -> str:
    return f"| {label} | " + " | ".join(_share(f) for f in found.values()) + " |"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.predictions")
    p.add_argument("--trace", action="append",
                   help="a trace file, or family:SEEDS (a trace per seed of the generator); "
                        "repeatable (default: contended.jsonl and shaped.jsonl)")
    p.add_argument("--policies", type=Path, default=ROOT / "policies")
    p.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = p.parse_args(argv)
    policy = load_policy(args.policies)
    traces: list[Member] = [m for t in (args.trace or [str(ROOT / t) for t in TRACES])
                            for m in members(t)]
    found = {m.label: measure(m.jobs, policy) for m in traces}
    if args.output == "json":
        print(json.dumps(found, indent=2))
        return 0
    print("the median error as a share of the wait, over the gangs that waited > 5 min "
          "(those with a known first prediction / all of them)")
    print("| trace | " + " | ".join(VARIANTS) + " |")
    print("|---|" + "---:|" * len(VARIANTS))
    for label, figures in found.items():
        print(_row(Path(label).name, figures))
    if len(found) > 1:
        print("| median of the traces | " + " | ".join(_median(found, v) for v in VARIANTS)
              + " |")
    return 0


def _median(found: dict[str, dict[str, dict[str, Any]]], variant: str) -> str:
    """The median over the traces of a variant's error, of those where any gang waited
    long: a trace where none did has no error to count."""
    shares = [s for f in found.values() if (s := f[variant]["medianErrorShareOfWait"]) is not None]
    return f"{statistics.median(shares):.1%}" if shares else "-"
