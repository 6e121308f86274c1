"""What happened to each job, and the figures drawn from it: the one place metrics are
computed, for a simulated run and for a real one alike (a real run's pod timelines give
the same `Timeline`: when each pod was bound and released, and when the whole job ran).
Pure: timelines in, numbers out.

- `wait`: from submit to the first moment every pod of the job runs;
- `utilization`: GPU-seconds of work that counted (jobs' completed runs) ÷ (capacity x
  makespan): GPUs held by half-placed gangs, and runs a preemption threw away, are not
  use;
- `partialGangGpuSeconds`: GPU-seconds held by pods of a multi-pod job while the job was
  not whole yet (bound, but waiting for the rest); `partialGangJobs`, those jobs', most
  first;
- `drainingGpuSeconds`: GPU-seconds held by pods of a multi-pod job after it stopped
  running whole (evicted or done, its pods ending one by one);
- `preemptions`: times a job lost pods to a preemption (a gang counts once per eviction);
  `lostGpuSeconds`: the work of runs a preemption cut short;
- `backfilled`: admissions onto the room reserved for the head of the queue, on the promise
  to end before the head could start (`--order backfill`);
- `neverRunnable`: jobs larger than the cluster could ever run (or rejected at admission);
- `stuck`: other jobs not completed when the run could make no more progress.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

# A pod on a node: (bound, released, GPUs).
Hold = tuple[float, float, int]
Period = tuple[float, float]
PARTIAL = "partial gangs"


@dataclass(slots=True)
class Timeline:
    name: str
    namespace: str
    cls: str
    pods: int
    gpus: int
    submit: float
    holds: list[Hold] = field(default_factory=list)
    # When every pod of the job ran (a job preempted while whole has several).
    whole: list[Period] = field(default_factory=list)
    completed: float | None = None
    preemptions: int = 0
    # Admissions onto the head's reserved room (backfill).
    backfilled: int = 0
    never_runnable: bool = False
    # Its first known predicted start, and whether its first forecast said unknown
    # (`forecasts`, with --predictions).
    predicted: float | None = None
    unknown_first: bool = False

    @property
    def started(self) -> float | None:
        return self.whole[0][0] if self.whole else None


def _overlap(a: float, b: float, periods: Sequence[Period]) -> float:
    return sum(max(0.0, min(b, y) - max(a, x)) for x, y in periods)


def partial_seconds(t: Timeline) -> float:
    """GPU-seconds the job's pods held waiting for the rest of it: from each pod's binding
    to the moment the job ran whole, or to its release when it never did."""
    if t.pods < 2:
        return 0.0
    return sum(g * (y - x) for a, b, g in t.holds
               for x, y in _outside(a, b, t.whole)[:1] if x == a)


def draining_seconds(t: Timeline) -> float:
    """GPU-seconds the job's pods held after it stopped running whole: a gang evicted or
    done, its pods going one by one. Neither use nor a half-placed gang."""
    if t.pods < 2:
        return 0.0
    return sum(g * (y - x) for a, b, g in t.holds for x, y in _outside(a, b, t.whole)
               if x > a)


def _held_in(t: Timeline, periods: Sequence[Period]) -> float:
    """GPU-seconds the job's pods held within `periods`: an elastic job runs with the
    pods it has, not with all of them."""
    return sum(g * _overlap(a, b, periods) for a, b, g in t.holds)


def used_seconds(t: Timeline) -> float:
    """GPU-seconds of work that counted: the run that completed (a run cut short by a
    preemption is lost, not used)."""
    if t.completed is None or not t.whole:
        return 0.0
    return _held_in(t, t.whole[-1:])


def lost_seconds(t: Timeline) -> float:
    """GPU-seconds of runs cut short by preemption (every run but a completed last one)."""
    return _held_in(t, t.whole if t.completed is None else t.whole[:-1])


def percentile(values: Sequence[float], p: float) -> float | None:
    """Nearest rank: the smallest value with at least p% of values at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


def _r(value: float | None, digits: int = 1) -> float | None:
    return None if value is None else round(value, digits)


def _figures(ts: Sequence[Timeline], capacity: int, makespan: float) -> dict[str, Any]:
    waits = [t.started - t.submit for t in ts if t.started is not None]
    used = sum(used_seconds(t) for t in ts)
    return {
        "jobs": len(ts),
        "completed": sum(1 for t in ts if t.completed is not None),
        "neverRunnable": sum(1 for t in ts if t.never_runnable),
        "stuck": sum(1 for t in ts if t.completed is None and not t.never_runnable),
        "wait": {"p50": _r(percentile(waits, 50)), "p99": _r(percentile(waits, 99)),
                 "mean": _r(sum(waits) / len(waits) if waits else None)},
        "utilization": round(used / (capacity * makespan), 4) if makespan > 0 else 0.0,
        "gpuSeconds": round(used),
        "partialGangGpuSeconds": round(sum(partial_seconds(t) for t in ts)),
        "drainingGpuSeconds": round(sum(draining_seconds(t) for t in ts)),
        "preemptions": sum(t.preemptions for t in ts),
        "backfilled": sum(t.backfilled for t in ts),
        "lostGpuSeconds": round(sum(lost_seconds(t) for t in ts)),
    }


def _grouped(ts: Iterable[Timeline], key: Callable[[Timeline], str]
             ) -> dict[str, list[Timeline]]:
    groups: dict[str, list[Timeline]] = defaultdict(list)
    for t in ts:
        groups[key(t)].append(t)
    return dict(sorted(groups.items()))


def summarize(timelines: Sequence[Timeline], capacity: int) -> dict[str, Any]:
    """The figures of a run on a cluster of `capacity` GPUs, overall, per namespace and
    per class (their utilization is their share of the whole cluster's)."""
    makespan = max((t.completed for t in timelines if t.completed is not None), default=0.0)
    out = _figures(timelines, capacity, makespan)
    out["makespan"] = round(makespan, 1)
    out["neverRunnableJobs"] = [f"{t.namespace}/{t.name}" for t in timelines
                                if t.never_runnable]
    # Which jobs held GPUs while not whole, most first: where to look when the figure
    # is not 0.
    partial = sorted(((round(s), f"{t.namespace}/{t.name}") for t in timelines
                      if (s := partial_seconds(t)) >= 1), reverse=True)
    out["partialGangJobs"] = {name: seconds for seconds, name in partial}
    out["namespaces"] = {ns: _figures(ts, capacity, makespan) for ns, ts in
                         _grouped(timelines, lambda t: t.namespace).items()}
    out["classes"] = {c: _figures(ts, capacity, makespan) for c, ts in
                      _grouped(timelines, lambda t: t.cls).items()}
    return out


# --- series over time, for plots ------------------------------------------------------

Steps = tuple[list[float], list[float]]


def _steps(deltas: dict[float, float]) -> Steps:
    times, values, level = [], [], 0.0
    for at in sorted(deltas):
        level += deltas[at]
        times.append(at)
        values.append(level)
    return times, values


def _outside(a: float, b: float, periods: Sequence[Period]) -> list[Period]:
    """[a, b) less the periods (which do not overlap each other)."""
    out, at = [], a
    for x, y in sorted(periods):
        if y <= at or x >= b:
            continue
        if x > at:
            out.append((at, x))
        at = max(at, y)
    if at < b:
        out.append((at, b))
    return out


def _within(a: float, b: float, periods: Sequence[Period]) -> list[Period]:
    """[a, b) within the periods."""
    return [(max(a, x), min(b, y)) for x, y in sorted(periods) if min(b, y) > max(a, x)]


def gpus_in_use(timelines: Iterable[Timeline]) -> dict[str, Steps]:
    """GPUs held over time: per class by jobs running whole, and by partial gangs."""
    deltas: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for t in timelines:
        for a, b, g in t.holds:
            for x, y in _within(a, b, t.whole):
                deltas[t.cls][x] += g
                deltas[t.cls][y] -= g
            if t.pods < 2:
                continue
            for x, y in _outside(a, b, t.whole):
                deltas[PARTIAL][x] += g
                deltas[PARTIAL][y] -= g
    return {label: _steps(d) for label, d in sorted(deltas.items())}


def queued(timelines: Iterable[Timeline], end: float) -> Steps:
    """Jobs submitted and neither running whole nor done, over time."""
    deltas: dict[float, float] = defaultdict(float)
    for t in timelines:
        waiting = _outside(t.submit, t.completed if t.completed is not None else end, t.whole)
        for a, b in waiting:
            deltas[a] += 1
            deltas[b] -= 1
    return _steps(deltas)


def waits_by_class(timelines: Iterable[Timeline]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for t in timelines:
        if t.started is not None:
            out[t.cls].append(t.started - t.submit)
    return dict(sorted(out.items()))
