"""What one round shares between the units it decides, and what each unit carries through
the stages (`stages`). Data and small helpers; the stages do the work."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.controller.core.actions import Action
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang, SizeAnswer
from webhook.controller.core.identities import UnitId
from webhook.controller.core.placement.backfill import Backfill
from webhook.controller.core.placement.fitting import NoFit
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.placement.pins import PinMode
from webhook.controller.core.placement.reservation import Order, Reservation
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.modelquotas import NO_MODEL, Model
from webhook.controller.core.queues.queueing import Hold, Queueing


@dataclass(frozen=True, slots=True)
class DecideOptions:
    order: Order = "backfill"
    # How long room let go to pods stays theirs before they bind.
    reservation_timeout: float = 120.0
    # How long a gang may be incomplete before its wait is a warning.
    incomplete_warning_after: float = 300.0
    # What a pod let go is pinned to: its planned node, or only its domain (`pins`).
    pin: PinMode = "nodes"
    # Seconds within which a forecast takes ends in one step (`forecasting`): a replay
    # that runs the clock faster shrinks it with the run times.
    forecast_resolution: float = 15.0


DEFAULTS: Final = DecideOptions()


class Round:
    """One round's shared state, which every unit's decision updates: the snapshot (room
    taken as units are admitted), the queues (usage charged), the head of the queue and
    its reservation, the nodes held for preemptors, and the fits known to fail."""

    def __init__(self, snap: Snapshot, queues: Queueing, sizes: Mapping[UnitId, SizeAnswer],
                 now: float, options: DecideOptions) -> None:
        self.snap = snap
        self.queues = queues
        self.sizes = sizes
        self.now = now
        self.options = options
        state = queues.state
        self.reservation = Reservation(options.order, Backfill(
            snap, state.runtimes, state.quotas.queue_of, now, state.spared))
        # Nodes held for units that preempted, per unit: nobody else may use them, and a
        # unit's are given back when it is admitted. `held` is their union, kept once
        # asked (every unit of the round asks it).
        self._held_for: dict[UnitId, frozenset[str]] = {}
        self._held: frozenset[str] | None = frozenset()
        # Units that did not fit, by what decides their fit: one alike (a batch Job's
        # next pod, the next gang of a sweep) does not fit either, since in a round free
        # room only shrinks and the nodes off limits only grow (room a preemption frees
        # off the nodes it holds is seen next round). Each fit is a pass over nodes, and
        # thousands of units may wait.
        self.no_room: dict[tuple[Any, ...], NoFit] = {}
        self._outside: dict[Model, frozenset[str]] = {}
        # The plans of the units admitted, where their pods go: a forecast gives their
        # room back when they are expected to end (`forecasting`).
        self.plans: dict[UnitId, Plan] = {}
        # The snapshot with the room of pods being deleted given back, and of the pods
        # this round evicts, as it stood when first asked since the last eviction: in a
        # round, room only shrinks, so it may only say too much fits, and a unit waits
        # one round more rather than evict or grow for nothing.
        self._once_gone: tuple[Snapshot | None, int] | None = None
        # Whether units fit there, by what decides their fit and their GPU model: a deep
        # queue of gangs alike is one fit, as for `no_room`.
        self.fits_once_gone: dict[tuple[Any, ...], bool] = {}

    def once_gone(self) -> Snapshot | None:
        """`Snapshot.once_gone`, with the pods this round evicts gone too."""
        going = self.queues.going
        if self._once_gone is None or self._once_gone[1] != len(going):
            self._once_gone = (self.snap.once_gone(going), len(going))
            self.fits_once_gone = {}
        return self._once_gone[0]

    @property
    def held(self) -> frozenset[str]:
        """The nodes held for any unit."""
        if self._held is None:
            self._held = frozenset().union(*self._held_for.values())
        return self._held

    def hold(self, unit: UnitId, nodes: Iterable[str]) -> None:
        self._held_for[unit] = self._held_for.get(unit, frozenset()) | frozenset(nodes)
        self._held = None

    def holds_of(self, other: Round) -> None:
        """The nodes `other` holds, held here too (a forecast's step)."""
        self._held_for, self._held = dict(other._held_for), other._held

    def release(self, unit: UnitId) -> None:
        """The nodes held for `unit` given back, once it is admitted: in its room or,
        when that no longer holds it, elsewhere; held on, that room would be kept from
        every other unit for the rest of the round, and the next preemptor would evict
        for room that is free."""
        if self._held_for.pop(unit, None) is not None:
            self._held = None

    def held_by_others(self, unit: UnitId) -> frozenset[str]:
        """The nodes held for units other than `unit`."""
        return frozenset().union(*(nodes for held, nodes in self._held_for.items()
                                   if held != unit))

    def outside(self, model: Model) -> frozenset[str]:
        """The nodes that are not of GPU `model` (of NO_MODEL: those of any model)."""
        found = self._outside.get(model)
        if found is None:
            cluster = self.snap.cluster
            models = cluster.models
            found = self._outside[model] = frozenset(models.of_node) if model is NO_MODEL \
                else frozenset(cluster.capacity.nodes).difference(models.nodes.get(model, ()))
        return found

    def pins(self, model: Model) -> tuple[tuple[str, str], ...]:
        """The node labels that pin a unit to GPU `model`."""
        return () if model is NO_MODEL else tuple(sorted(
            self.snap.cluster.models.labels(model).items()))


@dataclass(slots=True)
class Unit:
    """A unit on its way through the stages: what each stage found, for the next."""

    gang: Gang
    # Room held for it: it preempted, and its victims are gone.
    hold: Hold | None = None
    # Part of it was admitted before (`Gang.started`), asked by most stages: read once.
    started: bool = False
    size: int = 0
    # An elastic gang's minimum (None: it runs whole or not at all), and the fewest it
    # starts with (its size when not elastic).
    minimum: int | None = None
    least: int = 0
    members: list[PodInfo] = field(default_factory=list)
    must: int = 0
    exempt: int = 0
    # What is said about pods the unit does not take (beyond its size).
    told: list[Action] = field(default_factory=list)
    # Nodes it may not use (the head's reservation, preemptors' holds), and when it is
    # expected to end when it may borrow the head's room.
    off_limits: set[str] = field(default_factory=set)
    until: float | None = None
    # The GPU model it takes (where policy names models), the nodes of other models,
    # which it may not use either, and why its queue's quota of the model would not
    # admit it.
    model: Model = NO_MODEL
    model_off: frozenset[str] = frozenset()
    over_model: str | None = None
    # The topology key it is placed by, and what decides its fit (None: not cached).
    key: str | None = None
    alike: tuple[Any, ...] | None = None
    # Its plan, or why none; why its queue would not admit it.
    outcome: Plan | NoFit | None = None
    over: str | None = None
    # Whether its no-fit was judged now, not taken from a unit alike.
    fresh: bool = True

    @property
    def anchor(self) -> PodInfo:
        return self.members[0]

    @property
    def avoid(self) -> set[str] | frozenset[str]:
        """Every node it may not use."""
        return self.off_limits | self.model_off if self.model_off else self.off_limits
