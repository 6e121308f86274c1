"""What evicting the pods on some nodes would cost, kept apart from the clock so that it
lasts from round to round until a pod on those nodes changes.

Per priority, the pods holding GPUs sorted by start, with running totals of their GPUs
and of GPUs times the moment their work is saved from (the checkpoint they state, else
their start). The work lost by evicting any run of them at `now` is then
`now * GPUs - that total`: two lookups, not a pass over the pods. Preemption ranks a
cluster's domains with it before planning a few exactly (`preempting`)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents

# (priority, start, GPUs, pod, checkpoint): how `tracking` keeps each pod holding GPUs.
Holding = tuple[int, float, GpuEquivalents, tuple[str, str], float | None]


@dataclass(frozen=True, slots=True)
class _Level:
    """The pods of one priority, oldest first; `gpus` and `saved` are running totals
    from 0, one longer than `starts`."""

    priority: int
    starts: list[float]
    gpus: list[GpuEquivalents]
    saved: list[float]


@dataclass(frozen=True, slots=True)
class _Cover:
    """The pods of a priority and those below it, whatever their start, the last saved
    first (the least work lost per GPU); `gpus` and `saved` are running totals from 0."""

    last: float  # the latest moment any pod's work is saved from
    gpus: list[GpuEquivalents]
    saved: list[float]


class Costs:
    __slots__ = ("_covers", "_levels")

    def __init__(self, holdings: Iterable[Holding]) -> None:
        by_priority: dict[int, list[tuple[float, GpuEquivalents, float]]] = {}
        for priority, started, gpus, _, checkpointed in holdings:
            by_priority.setdefault(priority, []).append(
                (started, gpus, gpus * max(started, checkpointed or 0.0)))
        # By the highest priority they take in: built by `bound` when first asked.
        self._covers: dict[int, _Cover] = {}
        self._levels = []
        for priority in sorted(by_priority):
            pods = sorted(by_priority[priority])
            self._levels.append(_Level(
                priority, [s for s, _, _ in pods],
                list(itertools.accumulate((g for _, g, _ in pods), initial=0)),
                list(itertools.accumulate((w for _, _, w in pods), initial=0.0))))

    def estimate(self, deficit: GpuEquivalents, below: int, young: float, now: float
                 ) -> tuple[int, float] | None:
        """What freeing `deficit` GPUs costs, taking pods below priority `below` that
        started by `young`, lowest priority first and youngest first within one (the
        least work lost per GPU): the highest priority taken and the work lost; None when
        all of them free less. An estimate: pods, not units (a gang's members elsewhere,
        budgets), are counted, by GPUs alone."""
        freed: GpuEquivalents = 0
        lost = 0.0
        for level in self._levels:
            if level.priority >= below:
                break
            first = bisect.bisect_right(level.starts, 0.0)  # started at all
            last = bisect.bisect_right(level.starts, young)
            gpus, saved = level.gpus, level.saved
            here = gpus[last] - gpus[first]
            if freed + here < deficit:
                freed += here
                lost += now * here - (saved[last] - saved[first])
                continue
            # The youngest of them that free enough: from `cut` to `last`.
            cut = bisect.bisect_right(gpus, gpus[last] - (deficit - freed), first, last + 1) - 1
            taken = gpus[last] - gpus[cut]
            return level.priority, lost + now * taken - (saved[last] - saved[cut])
        return None

    def bound(self, deficit: GpuEquivalents, now: float) -> tuple[int, float] | None:
        """No more than what freeing `deficit` GPUs costs, whichever of the pods are
        taken, in whole units or not, young or not: the lowest priority by which the pods
        free that much, and the work lost taking the pods up to that priority least lost
        per GPU first, the last one in part. Any choice that frees `deficit` costs at
        least this (priority first, then work); None when all the pods free less.
        Preemption walks a domain's units only while its bound can still rank it among
        the best."""
        # The first level by which all the pods free enough.
        top = bisect.bisect_left(list(itertools.accumulate(
            level.gpus[-1] for level in self._levels)), deficit)
        if top == len(self._levels):
            return None
        cover = self._covers.get(top) or self._covering(top)
        priority = self._levels[top].priority
        if cover.last > now:
            # A pod saved in the future loses less than nothing per GPU: taking more of it
            # than `deficit` costs less again, so only the priority bounds.
            return priority, float("-inf")
        # The pods before `last` are taken whole, and of `last` what is still missing.
        last = bisect.bisect_left(cover.gpus, deficit) - 1
        gpus, saved = cover.gpus, cover.saved
        part = (deficit - gpus[last]) / (gpus[last + 1] - gpus[last])
        lost = now * deficit - saved[last] - part * (saved[last + 1] - saved[last])
        # Less a GPU-second: these sums and a walk's, added in other orders, differ in
        # their last bits, and a bound must never pass what it bounds.
        return priority, lost - 1.0

    def _covering(self, top: int) -> _Cover:
        """The pods of levels up to `top` (each one's GPUs and saved-from moment, from
        the running totals), the last saved first."""
        pods = sorted(((s1 - s0) / (g1 - g0), g1 - g0)
                      for level in self._levels[:top + 1]
                      for (g0, g1), (s0, s1) in zip(itertools.pairwise(level.gpus),
                                                    itertools.pairwise(level.saved),
                                                    strict=True)
                      if g1 > g0)
        pods.reverse()
        cover = self._covers[top] = _Cover(
            pods[0][0] if pods else 0.0,
            list(itertools.accumulate((g for _, g in pods), initial=0)),
            list(itertools.accumulate((g * s for s, g in pods), initial=0.0)))
        return cover
