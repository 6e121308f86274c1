"""Which gang goes first, and what a gang that cannot go yet holds back.

Gangs compete by priority (the pods' `spec.priority`, resolved from their PriorityClass
at admission), then by their queue's fair share (lowest first, read afresh at each pick,
so the entry charges of gangs admitted earlier in the same round count), then by arrival
(the creation of their oldest member), then by name.

The *head* is the first gang in that order that is complete but does not fit.
- `strict`: the head blocks every gang behind it, so it goes as soon as its room frees.
- `backfill`: gangs behind the head may go, but not onto the nodes kept for the head
  (its best candidate domain: the eligible domain with the most free GPUs, or the
  eligible nodes with the most free GPUs when it has no topology) unless they are
  expected to end before the head could start there anyway (`backfill`). Capacity that
  frees there is the head's, so smaller gangs that keep fitting elsewhere never starve it.
Gangs that are incomplete or whose size is unknown are not candidates for the head:
they could not go anyway, and must not hold capacity they may never use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Literal

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import UnitId
from webhook.controller.core.objects import PodInfo
from webhook.controller.core.placement.backfill import Backfill, spare
from webhook.controller.core.placement.fitting import NoFit, Plan

Order = Literal["strict", "backfill"]


def queue_order(gangs: Iterable[Gang], queue_of: Callable[[Gang], str] = lambda _: "",
                share: Callable[[str], float] = lambda _: 0.0,
                head: UnitId | None = None) -> Iterator[Gang]:
    """The gangs in admission order. Each queue's own gangs keep their order (priority,
    arrival); between queues the next pick compares their first gangs, with the share
    as it stands at that moment. The `head` of the last round goes first among gangs of
    its priority: room kept for it drains only while it stays the head, and shares that
    move as others are admitted would otherwise hand the head, and the room kept, from
    one gang to another, and no kept room would ever drain."""
    lines: dict[str, list[Gang]] = {}
    for gang in gangs:
        lines.setdefault(queue_of(gang), []).append(gang)
    for line in lines.values():
        line.sort(key=lambda g: (-g.priority, g.id != head, g.arrival, g.id), reverse=True)
    while lines:
        queue = min(lines, key=lambda q: (-lines[q][-1].priority, lines[q][-1].id != head,
                                          share(q), lines[q][-1].arrival, lines[q][-1].id))
        line = lines[queue]
        yield line.pop()
        if not line:
            del lines[queue]


class HeadOfLine:
    """The first gang of a round that is complete but does not fit, and the nodes kept
    for it: what gangs behind it may not take (`backfill`, unless they end before the
    head could start), or that they wait behind (`strict`)."""

    def __init__(self, order: Order, backfill: Backfill | None = None) -> None:
        self.order = order
        self.head: UnitId | None = None
        self.kept: set[str] = set()
        self.backfill = backfill if order == "backfill" else None
        # The head's pods, and the kept nodes' free GPUs as it became the head: its start
        # is judged from those, not from what backfills took since (they end before it).
        self._members: Sequence[PodInfo] = ()
        self._free: dict[str, GpuEquivalents] = {}
        self._start: float | None = None
        # Kept nodes the head would not need even at its start (EASY's second rule).
        self._spare: frozenset[str] = frozenset()
        self._judged = False

    def behind(self) -> str | None:
        """Why the next gang may not even try (strict order behind a head), or None."""
        if self.head is None or self.order != "strict":
            return None
        return f"behind {self.head}, first in the queue"

    def did_not_fit(self, gang: Gang, outcome: NoFit, members: Sequence[PodInfo] = ()
                    ) -> None:
        if self.head is None:
            self.head = gang.id
            self.kept.update(outcome.best_domain_nodes)
            if self.backfill is not None and self.kept:
                free = self.backfill.snap.free_gpu
                self._members = members or gang.waiting
                self._free = {n: free[n] for n in self.kept}

    def start(self) -> float | None:
        """The head's shadow time: when it is expected to be able to start on its kept
        nodes; None when unknown (or no backfill)."""
        if not self._judged and self.backfill is not None and self._free:
            found = self.backfill.start(self._members, self._free)
            if found is not None:
                self._start = found.at
                if not any(p.slice_key for p in self._members):
                    gpus = self.backfill.snap.gpus
                    self._spare = spare(found.room, [gpus(p.requests) for p in self._members])
            self._judged = True
        return self._start

    def kept_from(self, pods: Sequence[PodInfo], stretch: float = 1.0
                  ) -> tuple[set[str], float | None]:
        """The nodes `pods`, of a gang behind the head, may not use: the kept ones but
        those the head would not need even at its start (EASY's second rule); and when
        they may use all of the head's, since they are expected to end before it starts
        (their run time `stretch`ed: `Backfill.until`), that end."""
        if not self.kept or self.backfill is None:
            return self.kept, None
        until = self.backfill.until(pods, stretch)
        start = self.start()
        if until is None or start is None or until > start:
            return self.kept - self._spare, None
        return set(), until

    def backfilled(self, plan: Plan, until: float | None) -> float | None:
        """`until` when the plan lets the gang onto the head's kept nodes, else None: a
        gang that went elsewhere promised the head nothing."""
        if until is None or self.kept.isdisjoint(plan.assignments.values()):
            return None
        return until
