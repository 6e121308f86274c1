"""No more than what evicting pods on some nodes would cost: a lower bound, kept apart
from the clock so that it lasts from round to round until a pod on those nodes changes.

Per priority, the pods holding GPUs, each as its GPUs and the moment its work is saved
from (the checkpoint it states, else its start). Taken the last saved first, with running
totals of GPUs and of GPUs times that moment, the work lost by evicting the first of them
at `now` is `now * GPUs - that total`: two lookups, not a pass over the pods. Preemption
walks a cluster's domains in the order of this bound, and stops once none can beat the
best it has estimated (`preempting`)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.identities import PodKey


class Holder(NamedTuple):
    """A pod holding GPUs on a node, in the victim order's first terms (`occupancy` keeps
    each node's, lowest priority first)."""

    priority: int
    started: float
    gpus: GpuEquivalents
    pod: PodKey
    checkpointed: float | None


@dataclass(frozen=True, slots=True)
class _Cover:
    """The pods of a priority and those below it, the last saved first (the least work
    lost per GPU); `gpus` and `saved` are running totals from 0."""

    last: float  # the latest moment any pod's work is saved from
    gpus: list[GpuEquivalents]
    saved: list[float]


# A node's pods holding GPUs, per priority: (priority, each pod as (saved from, GPUs),
# their GPUs). Kept per node between rounds (`occupancy`): a set of nodes' costs are then
# built from its nodes' parts, not from every pod on them. Tuples of numbers, which the
# cyclic collector stops tracking: thousands of nodes keep one.
Part = tuple[tuple[int, tuple[tuple[float, GpuEquivalents], ...], GpuEquivalents], ...]


def part_of(holdings: Iterable[Holder]) -> Part:
    by_priority: dict[int, list[tuple[float, GpuEquivalents]]] = {}
    gpus_at: dict[int, GpuEquivalents] = {}
    for priority, started, gpus, _, checkpointed in holdings:
        if gpus > 0:
            saved = checkpointed or 0.0
            pod = (saved if saved > started else started, gpus)  # `saved_from`
            level = by_priority.get(priority)
            if level is None:
                by_priority[priority] = [pod]
                gpus_at[priority] = gpus
            else:
                level.append(pod)
                gpus_at[priority] += gpus
    return tuple((p, tuple(pods), gpus_at[p]) for p, pods in by_priority.items())


class Costs:
    __slots__ = ("_covers", "_levels", "_priorities", "_totals")

    def __init__(self, holdings: Iterable[Holder] = (), parts: Iterable[Part] = ()) -> None:
        """The costs of evicting `holdings`, and the pods of `parts` (`part_of`)."""
        by_priority: dict[int, list[tuple[float, GpuEquivalents]]] = {}
        gpus_at: dict[int, GpuEquivalents] = {}
        for priority, pods, gpus in itertools.chain(part_of(holdings), *parts):
            level = by_priority.get(priority)
            if level is None:
                by_priority[priority] = [*pods]  # a list: other parts join it
                gpus_at[priority] = gpus
            else:
                level.extend(pods)
                gpus_at[priority] += gpus
        self._priorities = sorted(by_priority)
        # Per priority, lowest first: its pods (saved from, GPUs), and the GPUs of all
        # the pods up to it.
        self._levels = [by_priority[p] for p in self._priorities]
        self._totals = list(itertools.accumulate(gpus_at[p] for p in self._priorities))
        # By the highest priority they take in: built by `bound` when first asked.
        self._covers: dict[int, _Cover] = {}

    def bound(self, deficit: GpuEquivalents, now: float) -> tuple[int, float] | None:
        """No more than what freeing `deficit` GPUs costs, whichever of the pods are
        taken, in whole units or not, young or not: the lowest priority by which the pods
        free that much, and the work lost taking the pods up to that priority least lost
        per GPU first, the last one in part. Any choice that frees `deficit` costs at
        least this (priority first, then work); None when all the pods free less.
        Preemption walks a domain's units only while its bound can still rank it among
        the best."""
        # The first level by which all the pods free enough.
        top = bisect.bisect_left(self._totals, deficit)
        if top == len(self._totals):
            return None
        cover = self._covers.get(top) or self._covering(top)
        priority = self._priorities[top]
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
        """The pods of levels up to `top`, the last saved first."""
        pods: list[tuple[float, GpuEquivalents]] = []
        for level in self._levels[:top + 1]:
            pods.extend(level)
        pods.sort(reverse=True)
        cover = self._covers[top] = _Cover(
            pods[0][0] if pods else 0.0,
            list(itertools.accumulate([g for _, g in pods], initial=0)),
            list(itertools.accumulate([g * s for s, g in pods], initial=0.0)))
        return cover
