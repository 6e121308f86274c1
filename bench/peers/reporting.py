"""The comparison as a person reads it: a markdown table, one column per system (and the
simulation of Airlock beside them), and how far the simulation is from the real run.

A system replayed more than once (`--runs N`, a trace family) shows each figure as its
median over the replays, and their spread (min-max) where they differ
(`bench.peers.aggregating`); once, its figures as they were."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from bench.peers.aggregating import Figures, Spread, ran, spread

Summary = dict[str, Any]
Show = Callable[[float], str]


def _n(value: float) -> str:
    return f"{value:,.0f}"


def _cell(figures: Figures, key: str, show: Show = _n) -> str:
    """The median, and (min-max) where the runs differ; `-` where no run has it."""
    s = figures.get(key) or Spread(None, None, None, 0)
    if s.median is None or s.low is None or s.high is None:
        return "-"
    if s.low == s.high:
        return show(s.median)
    return f"{show(s.median)} ({show(s.low)}-{show(s.high)})"


def _seconds(*keys: str) -> Callable[[Figures], str]:
    def show(f: Figures) -> str:
        cells = [_cell(f, k) for k in keys]
        if set(cells) == {"-"}:
            return "-"
        return " / ".join(cells) + ("" if cells[-1] == "-" else " s")
    return show


def _jobs(f: Figures) -> str:
    out = f"{_cell(f, 'completed')} / {_cell(f, 'jobs')}"
    left = [f"{_cell(f, key)} {word}" for key, word in (("stuck", "stuck"),
                                                         ("neverRunnable", "never runnable"))
            if (f.get(key) or Spread(0, 0, 0, 0)).high]
    return ", ".join([out, *left])


def _hours(key: str) -> Callable[[Figures], str]:
    return lambda f: _cell(f, key, lambda v: f"{v / 3600:,.2f}")


_ROWS: tuple[tuple[str, Callable[[Figures], str]], ...] = (
    ("jobs completed", _jobs),
    ("makespan", _seconds("makespan")),
    ("wait p50 / p99", _seconds("wait.p50", "wait.p99")),
    *((f"{cls} wait p50 / p99", _seconds(f"classes.{cls}.wait.p50", f"classes.{cls}.wait.p99"))
      for cls in ("inference", "training", "scavenger")),
    ("training wait mean", _seconds("classes.training.wait.mean")),
    ("utilization", lambda f: _cell(f, "utilization", lambda v: f"{v:.1%}")),
    ("partial-gang GPU-hours", _hours("partialGangGpuSeconds")),
    # Jobs whose pods, bound together, broke the topology the trace requires of them.
    ("jobs that broke a required topology", lambda f: _cell(f, "topologyBroken")),
    # Pods of a gang evicted or done, ending one by one: the apiserver's pace, not a
    # half-placed gang.
    ("draining GPU-hours", _hours("drainingGpuSeconds")),
    ("preemptions", lambda f: _cell(f, "preemptions")),
    ("GPU-hours lost to preemption", _hours("lostGpuSeconds")),
    # Airlock's own predicted starts, for the jobs that waited more than 5 minutes.
    ("predicted start error p50", _seconds("predictions.medianErrorSeconds")),
    ("... p50 as a share of the wait", lambda f: _cell(
        f, "predictions.medianErrorShareOfWait", lambda v: f"{v:.0%}")),
    ("... within ±25% (or ±60 s)", lambda f: _cell(
        f, "predictions.withinShare", lambda v: f"{v:.0%}")),
)


def markdown(systems: Mapping[str, Sequence[Summary]],
             simulated: Sequence[Summary] | None) -> str:
    """One table, a column per system (waits in trace seconds, per class too), each given
    its runs' summaries; a system none of whose runs ran shows its error under it
    instead, and a run that failed among others is counted under the table."""
    columns = {name: spread(runs) for name, runs in systems.items() if ran(runs)}
    if simulated:
        columns["airlock simulate"] = spread(simulated)
    lines = ["| | " + " | ".join(columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += [f"| {label} | " + " | ".join(show(f) for f in columns.values()) + " |"
              for label, show in _ROWS]
    most = max((len(runs) for runs in systems.values()), default=1)
    if most > 1:
        sims = "" if not simulated or len(simulated) in (1, most) else \
            f" (`airlock simulate`: {len(simulated)}, one per trace)"
        lines.append(f"\nEach figure: the median of {most} replays per system{sims}, and "
                     "their spread (min-max) where they differ.")
    for name, runs in systems.items():
        failed = [s for s in runs if "error" in s]
        # A build's error ends with the Go tool's own lines: the table keeps the first.
        if failed and len(failed) == len(runs):
            lines.append(f"\n**{name}** did not run: {failed[0]['error'].splitlines()[0]}")
        elif failed:
            lines.append(f"\n**{name}**: {len(failed)} of {len(runs)} replays did not run "
                         f"(first: {failed[0]['error'].splitlines()[0]})")
    return "\n".join(lines) + "\n"


def gap(real: Summary, simulated: Summary) -> dict[str, float | None]:
    """Simulated minus real: wait in seconds, utilization in points of the cluster."""
    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 1)

    return {
        "waitP50": minus(simulated["wait"]["p50"], real["wait"]["p50"]),
        "waitP99": minus(simulated["wait"]["p99"], real["wait"]["p99"]),
        "utilization": round(simulated["utilization"] - real["utilization"], 4),
    }
