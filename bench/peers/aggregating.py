"""Figures over repeated replays (pure): one run swings utilization by points, so with
`--runs N` (or a trace family, whose every member is replayed) each figure of a system is
given as the median and the spread (min and max) of its replays.

A figure is a numeric leaf of a run's summary (the keys of `airlock simulate -o json`),
named by its path: `utilization`, `wait.p99`, `classes.training.wait.mean`, ... The
per-namespace figures are left out (a team's share is not a column of the comparison);
a figure a run has no value for (a class's p99 where no job of the class ran) is left out
of that run's sample, and is `None` when no run has one. The median of an even number of
runs is the mean of the two middle ones (`statistics.median`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Summary = dict[str, Any]
# Summaries' keys that are no figure of the comparison: a team's own figures, names.
_LEFT_OUT = frozenset({"namespaces", "neverRunnableJobs", "partialGangJobs", "ended", "run",
                       "trace", "topologyBrokenJobs"})


@dataclass(frozen=True, slots=True)
class Spread:
    """A figure over the runs that have it: `runs` of them."""

    median: float | None
    low: float | None
    high: float | None
    runs: int

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Spread:
        have = [v for v in values if v is not None]
        if not have:
            return cls(None, None, None, 0)
        return cls(statistics.median(have), min(have), max(have), len(have))

    def json(self) -> dict[str, float | int | None]:
        def r(v: float | None) -> float | None:
            return None if v is None else round(v, 4)

        return {"median": r(self.median), "min": r(self.low), "max": r(self.high),
                "runs": self.runs}


Figures = dict[str, Spread]


def flatten(summary: Mapping[str, Any], prefix: str = "") -> dict[str, float | None]:
    """Every figure of one run's summary, by its dotted path."""
    out: dict[str, float | None] = {}
    for key, value in summary.items():
        if key in _LEFT_OUT:
            continue
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, path + "."))
        elif value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            out[path] = value
    return out


def ran(summaries: Sequence[Summary]) -> list[Summary]:
    """The runs that ran (a run whose system could not be built or started is an error)."""
    return [s for s in summaries if "error" not in s]


def spread(summaries: Sequence[Summary]) -> Figures:
    """Each figure's median and spread over the runs that ran, in the order first seen."""
    flats = [flatten(s) for s in ran(summaries)]
    keys = list(dict.fromkeys(k for f in flats for k in f))
    return {k: Spread.of([f.get(k) for f in flats]) for k in keys}


def medians(figures: Mapping[str, Spread]) -> Summary:
    """The medians in a summary's nested shape, so what reads one run reads them too."""
    out: Summary = {}
    for path, s in figures.items():
        *parents, leaf = path.split(".")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = s.median
    return out


def system_json(summaries: Sequence[Summary]) -> Summary:
    """One replay: its summary, as a single run has always been written. Several:
    `{"figures": {path: {"median", "min", "max", "runs"}}, "runs": [summary, ...]}`, and
    `error` (the first run's) if none ran."""
    if len(summaries) == 1:
        return summaries[0]
    out: Summary = {}
    if not ran(summaries):
        out["error"] = summaries[0]["error"]
    else:
        out["figures"] = {k: s.json() for k, s in spread(summaries).items()}
    out["runs"] = list(summaries)
    return out


def median_run(summaries: Sequence[Summary]) -> int | None:
    """The index of the run whose utilization is nearest the median (the first such): the
    run a plot of one run shows."""
    indexed = [(i, s["utilization"]) for i, s in enumerate(summaries) if "error" not in s]
    if not indexed:
        return None
    middle = statistics.median(u for _, u in indexed)
    return min(indexed, key=lambda iu: (abs(iu[1] - middle), iu[0]))[0]
