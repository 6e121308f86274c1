"""How long runs of one kind last, counting those still running (Kaplan-Meier), for
forecasts (`runtimes.Runtimes.typical`).

Learned from the runs that ended alone, a run time is short: early in a day the runs that
ended are the short ones, the long ones still run. Each run still going is known to last
at least as long as it has run so far, and counts so (a right-censored observation): on
`contended.jsonl`, the 4 training gangs that had succeeded an hour in had run a median of
1,390 s, all 24 of the day 2,053 s. Pure."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Survival:
    """The share of runs still going past each time a run ended (ascending), and the
    longest time any run was seen to last (ended or still running)."""

    ends: tuple[float, ...]
    # Negated share still going just after each end: ascending, for `bisect`.
    gone: tuple[float, ...]
    longest: float


def survival(ended: Sequence[float], running: Sequence[float]) -> Survival:
    """The survival of runs that lasted `ended`, beside runs going for `running` so far
    (ends before a run still going at the same time: it lasted longer)."""
    seen = sorted([(t, 0) for t in ended] + [(t, 1) for t in running])
    at_risk, left = len(seen), 1.0
    ends: list[float] = []
    gone: list[float] = []
    for t, still in seen:
        if not still:
            left *= 1 - 1 / at_risk
            ends.append(t)
            gone.append(-left)
        at_risk -= 1
    return Survival(tuple(ends), tuple(gone), seen[-1][0] if seen else 0.0)


def median_beyond(s: Survival, ran: float) -> float:
    """The median run time of a run going for `ran` so far: when half of the runs that
    lasted longer than `ran` had ended (between two ends, when exactly half had ended at
    the first). When fewer than half did, the longest any lasted, else `ran`."""
    before = bisect.bisect_right(s.ends, ran)
    left_at_ran = -s.gone[before - 1] if before else 1.0
    half = left_at_ran / 2
    # The first end after `ran` where no more than half of those going at `ran` remain.
    found = bisect.bisect_left(s.gone, -half * (1 + 1e-12), lo=before)
    if found == len(s.ends):
        return max(s.longest, ran)
    if abs(-s.gone[found] - half) <= half * 1e-9 and found + 1 < len(s.ends):
        return (s.ends[found] + s.ends[found + 1]) / 2
    return s.ends[found]
