"""What a unit that cannot go yet holds back: the head of the queue and its reservation.

The *head* is the first unit in queue order (`queues.order`) that is complete but does
not fit. Its *reservation* is the room it would take first once capacity frees: its best
candidate domain (the eligible domain with the most free GPUs, or the one reserved for it
last round while that could hold it), or the eligible nodes with the most free GPUs when
it has no topology.
- `strict`: the head blocks every unit behind it, so it goes as soon as its room frees.
- `backfill`: units behind the head may go, but not onto its reservation unless they are
  expected to end before the head could start there anyway (`backfill`), or onto the
  reserved nodes the head would not need even then. Capacity that frees there is the
  head's, so smaller gangs that keep fitting elsewhere never starve it.
Units that are incomplete or whose size is unknown are not candidates for the head: they
could not go anyway, and must not reserve capacity they may never use. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import UnitId
from webhook.controller.core.placement.backfill import Backfill, spare
from webhook.controller.core.placement.fitting import NoFit
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.pods import PodInfo

Order = Literal["strict", "backfill"]


class Reservation:
    """The head of a round's queue and the nodes reserved for it: what units behind it
    may not take (`backfill`, unless they end before the head could start), or that they
    wait behind (`strict`)."""

    def __init__(self, order: Order, backfill: Backfill | None = None) -> None:
        self.order = order
        self.head: UnitId | None = None
        self.nodes: set[str] = set()
        self.backfill = backfill if order == "backfill" else None
        # The head's pods, and the reserved nodes' free GPUs as it became the head: its
        # start is judged from those, not from what backfills took since (they end
        # before it).
        self._members: Sequence[PodInfo] = ()
        self._gang: Gang | None = None
        self._free: dict[str, GpuEquivalents] = {}
        self._start: float | None = None
        # Reserved nodes the head would not need even at its start (EASY's second rule).
        self._spare: frozenset[str] = frozenset()
        self._judged = False
        # The reserved nodes but the spare ones, once judged: asked by every unit behind.
        self._kept: set[str] | None = None

    def behind(self) -> str | None:
        """Why the next gang may not even try (strict order behind a head), or None."""
        if self.head is None or self.order != "strict":
            return None
        return f"behind {self.head}, first in the queue"

    def claim(self, gang: Gang, outcome: NoFit, members: Sequence[PodInfo] = ()) -> None:
        """A unit that does not fit: the first to claim heads the queue, and the room it
        would take first is reserved for it."""
        if self.head is None:
            self.head = gang.id
            self.nodes.update(outcome.best_domain_nodes)
            self._kept = None
            if self.backfill is not None and self.nodes:
                free = self.backfill.snap.free_gpu
                self._members = members or gang.waiting
                self._gang = gang
                self._free = {n: free[n] for n in self.nodes}

    def start(self) -> float | None:
        """The head's shadow time: when it is expected to be able to start on its
        reserved nodes; None when unknown (or no backfill)."""
        if not self._judged and self.backfill is not None and self._free:
            found = self.backfill.start(self._members, self._free, self._gang)
            if found is not None:
                self._start = found.at
                if not any(p.marks.slice_key for p in self._members):
                    gpus = self.backfill.snap.gpus
                    self._spare = spare(found.room, [gpus(p.requests) for p in self._members])
            self._judged = True
        return self._start

    def off_limits(self, pods: Sequence[PodInfo], stretch: float = 1.0,
                   gang: Gang | None = None) -> tuple[set[str], float | None]:
        """The nodes `pods`, of a unit behind the head, may not use: the reserved ones but
        those the head would not need even at its start (EASY's second rule); and when
        they may borrow all of it, since they are expected to end before it starts (their
        run time `stretch`ed: `Backfill.until`), that end. The set returned is shared:
        not to be changed."""
        if not self.nodes:
            return set(), None  # a head that claims later fills `nodes`
        if self.backfill is None:
            return self.nodes, None
        start = self.start()
        # No end is asked of a unit while the head's start is unknown: nothing borrows.
        until = None if start is None else self.backfill.until(pods, stretch, gang)
        if until is None or start is None or until > start:
            if self._kept is None:
                self._kept = self.nodes - self._spare
            return self._kept, None
        return set(), until

    def borrowed_until(self, plan: Plan, until: float | None) -> float | None:
        """`until` when the plan lets the unit onto the head's reserved nodes, else None:
        a unit that went elsewhere promised the head nothing."""
        if until is None or self.nodes.isdisjoint(plan.assignments.values()):
            return None
        return until
