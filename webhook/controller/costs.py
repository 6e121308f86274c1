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


class Costs:
    __slots__ = ("_levels",)

    def __init__(self, holdings: Iterable[Holding]) -> None:
        by_priority: dict[int, list[tuple[float, GpuEquivalents, float]]] = {}
        for priority, started, gpus, _, checkpointed in holdings:
            by_priority.setdefault(priority, []).append(
                (started, gpus, gpus * max(started, checkpointed or 0.0)))
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
