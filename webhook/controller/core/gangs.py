"""Gangs as the controller sees them: members grouped by gang label, and the decisions
already recorded on them. Data only; `deciding` does the work.

A gang's members fall into three groups:
- *let go*: no longer gated (admitted earlier, bound or on their way);
- *promised*: still gated, but named in a recorded decision (a controller died half-way
  through the lift): they are finished first, in the recorded domain;
- *waiting*: gated and in no record: the whole gang at first, or later replacements and
  late joiners of a gang that already runs.

A single pod that Airlock queued (`Marks.single`) is a unit of its own (`UnitId` of
kind `pod`) from its admission until it is bound: it waits, is admitted and preempts like
a gang, and carries its own record. Bound, it is a single pod again (and, as a victim,
one).
"""

from __future__ import annotations

import functools
import weakref
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import PreemptionRecord, Record
from webhook.conventions.base import Elastic, SizeUnknown

# A size, or why it cannot be known (the kind is not installed, ...).
SizeAnswer = int | Elastic | SizeUnknown


class Shape:
    """What decides where pods fit, in an order independent of theirs: gangs of one shape
    fit alike. Hashed once: a round looks a shape up for every gang that waits, and a
    gang of a hundred pods is a deep tuple to hash. One object per shape while any gang
    holds it (`of`): a look-up then finds it by identity, not by comparing the tuples."""

    __slots__ = ("__weakref__", "_hash", "fits")

    def __init__(self, fits: tuple[tuple[Any, int], ...]) -> None:
        self.fits = fits
        self._hash = hash(fits)

    @classmethod
    def of(cls, pods: Iterable[PodInfo]) -> Shape:
        fits = tuple(sorted(Counter(p.fit for p in pods).items()))
        found = _SHAPES.get(fits)
        if found is None:
            found = _SHAPES[fits] = cls(fits)
        return found

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Shape) and self._hash == other._hash \
            and self.fits == other.fits


_SHAPES: weakref.WeakValueDictionary[tuple[tuple[Any, int], ...], Shape] = \
    weakref.WeakValueDictionary()


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
    def unbound(self) -> list[PodInfo]:
        """Members let go that the scheduler has not bound yet: room promised to them."""
        return [p for p in self.members if not p.gated and not p.node_name]

    @functools.cached_property
    def invalid(self) -> PodInfo | None:
        """A member carrying what Airlock cannot follow: the unit is set aside."""
        return next((p for p in self.members if p.invalid), None)

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

    # What a round asks of a waiting gang, kept with it: the gang is built again only when
    # a member changes, and a deep queue is read whole every round, so counting over
    # every member each time made a round's cost the queue's pods, not what changed.

    def whole(self, members: Sequence[PodInfo]) -> bool:
        """Whether `members`, taken from this gang's members in order, are all of them."""
        return len(members) == len(self.members)

    @functools.cached_property
    def completed(self) -> float:
        """When the last member was created."""
        return max(p.created for p in self.members)

    @functools.cached_property
    def shape(self) -> Shape:
        return Shape.of(self.members)

    @functools.cached_property
    def preemption(self) -> PreemptionRecord | None:
        """The preemption recorded for the gang (on its anchor pod)."""
        return next((r for p in self.members if (r := p.recorded.preemption) is not None), None)

    @functools.cached_property
    def _needs(self) -> dict[Accelerators, GpuEquivalents]:
        return {}

    def need(self, accelerators: Accelerators) -> GpuEquivalents:
        """GPUs all members request together."""
        found = self._needs.get(accelerators)
        if found is None:
            count = accelerators.count
            found = self._needs[accelerators] = sum(count(p.requests) for p in self.members)
        return found

    @functools.cached_property
    def stated_runtime(self) -> float | None:
        """The longest run time a member states (`Runtimes.expected`), if any does."""
        return max((r for p in self.members if (r := p.marks.runtime) is not None),
                   default=None)

    @functools.cached_property
    def _sizes(self) -> dict[Accelerators, tuple[GpuEquivalents, ...]]:
        return {}

    def sizes(self, accelerators: Accelerators) -> tuple[GpuEquivalents, ...]:
        """GPUs each member requests, most first."""
        found = self._sizes.get(accelerators)
        if found is None:
            count = accelerators.count
            found = self._sizes[accelerators] = tuple(sorted(
                (count(p.requests) for p in self.members), reverse=True))
        return found

    @functools.cached_property
    def distinct(self) -> tuple[PodInfo, ...]:
        """One member of each `fit` (the last): members alike fit alike."""
        return tuple({p.fit: p for p in self.members}.values())

    @functools.cached_property
    def _stated(self) -> frozenset[int]:
        return frozenset(n for p in self.members if (n := p.marks.expected_size) is not None)

    @functools.cached_property
    def _stated_min(self) -> frozenset[int]:
        return frozenset(n for p in self.members if (n := p.marks.min_size) is not None)

    def size(self, looked_up: Mapping[UnitId, SizeAnswer]) -> int | SizeUnknown | None:
        """The size the members state, else the owner's (looked up), else the size
        recorded at admission; None while a lookup is under way."""
        if self.single:
            return 1
        stated = self._stated
        if len(stated) > 1:
            # Pods of two revisions: no guess; the gang waits until its pods agree.
            return SizeUnknown(f"members state different sizes "
                               f"({', '.join(map(str, sorted(stated)))}); waiting until they agree")
        if stated:
            return next(iter(stated))
        found = looked_up.get(self.id)
        if found is None and self.records:
            return self.records[0].size
        return found.size if isinstance(found, Elastic) else found

    def minimum(self, looked_up: Mapping[UnitId, SizeAnswer], size: int) -> int | None:
        """An elastic gang's minimum, below `size`: what its members state, else what its
        owner states; None for a gang that runs whole or not at all (members that state
        different minimums included: no guess)."""
        if self.single:
            return None
        stated = self._stated_min
        found = looked_up.get(self.id)
        least = next(iter(stated)) if len(stated) == 1 else \
            found.minimum if not stated and isinstance(found, Elastic) else None
        return least if least is not None and least < size else None

    def home(self) -> tuple[str | None, str | None]:
        """(topology key, domain) where the gang already runs: the first record's, else
        the domain pinned on any member let go (a record lost with its anchor pod)."""
        if self.records:
            first = self.records[0]
            return first.topology_key, first.domain
        for p in self.let_go:
            key = p.marks.topology_key
            if key and key in p.constraints.node_selector:
                return key, p.constraints.node_selector[key]
        return None, None


def membership(pod: PodInfo) -> UnitId | None:
    """The unit an active pod is admitted with: its gang, or itself, for a queued single
    pod not bound yet."""
    gang = pod.gang_id
    if gang is not None:
        return UnitId.of_gang(gang)
    if pod.marks.single and pod.node_name is None:
        return UnitId.of_pod(pod.key)
    return None


def gang_of(gang_id: UnitId, members: Iterable[PodInfo]) -> Gang:
    """A gang from its active members, with the decisions they record."""
    ordered = tuple(sorted(members, key=lambda p: (p.created, p.name)))
    records = (p.recorded.placement for p in ordered if p.recorded.placement is not None)
    return Gang(gang_id, ordered, tuple(sorted(records, key=lambda r: r.at)))
