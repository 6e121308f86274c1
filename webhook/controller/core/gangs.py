"""Gangs as the controller sees them: members grouped by gang label, and the decisions
already recorded on them. Data only; `deciding` does the work.

A gang's members fall into three groups:
- *let go*: no longer gated (admitted earlier, bound or on their way);
- *promised*: still gated, but named in a recorded decision (a controller died half-way
  through the lift): they are finished first, in the recorded domain;
- *waiting*: gated and in no record: the whole gang at first, or later replacements and
  late joiners of a gang that already runs.

A single pod that Airlock queued (`PodInfo.single`) is a unit of its own (`UnitId` of
kind `pod`) from its admission until it is bound: it waits, is admitted and preempts like
a gang, and carries its own record. Bound, it is a single pod again (and, as a victim,
one).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from webhook.controller.core.identities import UnitId
from webhook.controller.core.objects import PodInfo
from webhook.controller.core.records import Record
from webhook.conventions.base import SizeUnknown

# A size, or why it cannot be known (the kind is not installed, ...).
SizeAnswer = int | SizeUnknown


@dataclass(frozen=True)
class Gang:
    """A gang's active members (not terminal, not being deleted), oldest first, and the
    decisions recorded on them. Frozen, and what it derives is kept: the tracked cluster
    builds a gang again only when a member changes, and every round reads each one."""

    id: UnitId
    members: tuple[PodInfo, ...] = ()
    records: tuple[Record, ...] = ()

    @property
    def name(self) -> str:
        return self.id.path

    @property
    def single(self) -> bool:
        return self.id.kind == "pod"

    @functools.cached_property
    def recorded(self) -> frozenset[str]:
        return frozenset(name for r in self.records for name in r.members)

    @functools.cached_property
    def let_go(self) -> list[PodInfo]:
        return [p for p in self.members if not p.gated]

    @functools.cached_property
    def promised(self) -> list[PodInfo]:
        recorded = self.recorded
        return [p for p in self.members if p.gated and p.name in recorded]

    @functools.cached_property
    def waiting(self) -> list[PodInfo]:
        recorded = self.recorded
        return [p for p in self.members if p.gated and p.name not in recorded]

    @functools.cached_property
    def started(self) -> bool:
        """Part of the gang was admitted before: what waits now joins it."""
        return bool(self.records) or any(not p.gated for p in self.members)

    @functools.cached_property
    def priority(self) -> int:
        return max(p.priority for p in self.members)

    @functools.cached_property
    def arrival(self) -> float:
        return min(p.created for p in self.members)

    def size(self, looked_up: Mapping[UnitId, SizeAnswer]) -> SizeAnswer | None:
        """The size the members state, else the owner's (looked up), else the size
        recorded at admission; None while a lookup is under way."""
        if self.single:
            return 1
        stated = {p.expected_size for p in self.members if p.expected_size is not None}
        if len(stated) > 1:
            # Pods of two revisions: no guess; the gang waits until its pods agree.
            return SizeUnknown(f"members state different sizes "
                               f"({', '.join(map(str, sorted(stated)))}); waiting until they agree")
        if stated:
            return stated.pop()
        found = looked_up.get(self.id)
        if found is None and self.records:
            return self.records[0].size
        return found

    def home(self) -> tuple[str | None, str | None]:
        """(topology key, domain) where the gang already runs: the first record's, else
        the domain pinned on any member let go (a record lost with its anchor pod)."""
        if self.records:
            first = self.records[0]
            return first.topology_key, first.domain
        for p in self.let_go:
            key = p.topology_key
            if key and key in p.node_selector:
                return key, p.node_selector[key]
        return None, None


def membership(pod: PodInfo) -> UnitId | None:
    """The unit an active pod is admitted with: its gang, or itself, for a queued single
    pod not bound yet."""
    gang = pod.gang_id
    if gang is not None:
        return UnitId.of_gang(gang)
    if pod.single and pod.node_name is None:
        return UnitId.of_pod(pod.key)
    return None


def gang_of(gang_id: UnitId, members: Iterable[PodInfo]) -> Gang:
    """A gang from its active members, with the decisions they record."""
    ordered = tuple(sorted(members, key=lambda p: (p.created, p.name)))
    records = (p.placement for p in ordered if p.placement is not None)
    return Gang(gang_id, ordered, tuple(sorted(records, key=lambda r: r.at)))
