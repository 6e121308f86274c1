"""The queues' part of a round: the order gangs are considered in (priority, fair share,
arrival), quota checks, when a gang may preempt, and the room held for a preemptor
until it is admitted. Pure; `deciding` calls it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from webhook.controller.core.actions import Preempt, Victim, Wait
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.placement.runtimes import Runtimes
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Budget
from webhook.controller.core.preemption.candidates import (
    Candidates,
    above_minimum,
    restarted,
    unit_id,
    unit_of,
)
from webhook.controller.core.preemption.criteria import PreemptionSettings, outranks
from webhook.controller.core.preemption.moving import plan_moves
from webhook.controller.core.preemption.notices import deadline, due
from webhook.controller.core.preemption.planning import Choice, Preemptor
from webhook.controller.core.queues.fairshare import FairShare
from webhook.controller.core.queues.modelquotas import NO_MODEL, Model, ModelLedgers, ModelQuotas
from webhook.controller.core.queues.order import queue_order
from webhook.controller.core.queues.quotas import Ledger, Quotas
from webhook.controller.core.records import PreemptionRecord


def _spent(unit: Victim, budgets: Iterable[Budget], allowance: dict[str, int]) -> str | None:
    """The budget that cannot lose the unit's pods, else None, counting them as gone."""
    hits = {b.name: sum(1 for p in unit.pods if p.key in b.pods) for b in budgets}
    for name, hit in hits.items():
        if hit and hit > allowance[name]:
            return name
    for name, hit in hits.items():
        allowance[name] -= hit
    return None


# Gangs that may look for victims in one round, first in the queue first: planning is the
# costly part of a round, and a round comes every few seconds anyway.
PLANS_PER_ROUND = 3


@dataclass(frozen=True, slots=True)
class QueueState:
    """What a round needs about queues beyond pods and nodes: the policy's queues and
    preemption settings, the decayed usage, the PodDisruptionBudgets, and when gangs
    were last evicted (for the requeue backoff)."""

    quotas: Quotas = field(default_factory=Quotas)
    preemption: PreemptionSettings = field(default_factory=PreemptionSettings)
    fair_share: FairShare | None = None
    budgets: tuple[Budget, ...] = ()
    evicted: Mapping[UnitId, float] = field(default_factory=dict)
    # Namespaces out of Airlock's scope (kube-system, its own, the policy's exclusions):
    # nothing there is ever preempted.
    spared: frozenset[str] = frozenset()
    # Since when each running gang has been short of members (`mending`).
    short_since: Mapping[UnitId, float] = field(default_factory=dict)
    # Uids of pods this controller deleted that the watch may not have reported yet (a
    # forecast adds those it plays to their end as it goes: `forecasting`).
    deleted: AbstractSet[str] = frozenset()
    # Units whose capacity request is open and not all there yet (placeholders not all
    # bound, a ProvisioningRequest not Provisioned): they wait for the room they asked
    # for, rather than take part of it and part of what was there.
    awaiting: frozenset[UnitId] = frozenset()
    # Run times learned from gangs that succeeded, for backfill (`runtimes`).
    runtimes: Runtimes = field(default_factory=Runtimes)
    # The head of the queue last round and the domain reserved for it: kept again while it
    # heads the queue (`fitting.fit`).
    reservation: tuple[UnitId, str] | None = None
    # Quotas per GPU model, where policy names models.
    models: ModelQuotas | None = None
    # Pods that may still be moved this hour (`moving`).
    moves_left: int = 0


@dataclass(frozen=True, slots=True)
class Hold:
    """Room held for a gang that preempted: nobody else may use `nodes`."""

    unit: UnitId
    record: PreemptionRecord
    nodes: frozenset[str]
    # Recorded victims still running (a leader died half-way) that may still go: the
    # eviction is not done.
    remaining: tuple[Victim, ...]
    # Recorded victims evicted but still there, terminating: kube-scheduler still counts
    # their room, so the gang stays gated until they are gone (lifted now, the members
    # that fit would bind and the rest wait: half a gang holding GPUs).
    terminating: tuple[PodInfo, ...] = ()
    # Recorded victims still running that the checks a fresh plan makes now keep, and
    # why: the record is the controller's, but the cluster moved since it was written.
    refused: tuple[tuple[Victim, str], ...] = ()


class Queueing:
    def __init__(self, state: QueueState, snap: Snapshot, now: float) -> None:
        self.state = state
        self.snap = snap
        self.cluster = snap.cluster
        self.now = now
        occupancy = self.cluster.occupancy
        self.gpus_of = occupancy.gpus_of
        self.ledger = Ledger(state.quotas, occupancy.namespace_gpus,
                             self.cluster.capacity.total)
        self.models = None if state.models is None else ModelLedgers(
            state.models, self.cluster.models)
        self.charges: dict[str, float] = {}
        self._preemptor: Preemptor | None = None
        self.plans = 0
        # Where the pods of each unit that preempted go once their victims are gone.
        self.preempting: dict[UnitId, Mapping[PodKey, str]] = {}
        # Units this round evicts: none of them is also let go (an elastic gang grown)
        # in the same round.
        self.evicting: set[UnitId] = set()
        # Their pods off their preemptors' nodes, whose room is still theirs.
        self.going: list[PodInfo] = []

    def queue_of(self, gang: Gang) -> str:
        return self.state.quotas.queue_of(gang.id.namespace)

    def share(self, queue: str) -> float:
        fair = self.state.fair_share
        if fair is None:
            return 0.0
        weight = self.state.quotas.spec(queue).weight
        return fair.share(queue, weight) + self.charges.get(queue, 0.0) / weight

    def order(self, gangs: Iterable[Gang]) -> Iterator[Gang]:
        last = self.state.reservation
        return queue_order(gangs, self.queue_of, self.share, last[0] if last else None)

    def over_quota(self, gang: Gang, members: Sequence[PodInfo]) -> str | None:
        return self.ledger.admissible(self.queue_of(gang), self.snap.unit_need(gang, members))

    def model_order(self, gang: Gang, named: Sequence[str]) -> tuple[Model, ...]:
        """The GPU models the gang may take, in the order it tries them; none where
        policy names no models."""
        models = self.state.models
        return () if models is None else models.order(self.queue_of(gang), named)

    def borrows_first(self, gang: Gang) -> bool:
        models = self.state.models
        return models is not None and self.queue_of(gang) in models.borrow_first

    def model_quota(self, gang: Gang, members: Sequence[PodInfo], model: Model
                    ) -> tuple[bool, str | None]:
        """Whether `members` on `model` stay within the queue's nominal quota of it, and
        why its quota of it would not admit them (None: it would, borrowing perhaps)."""
        if self.models is None or not members:
            return True, None
        queue, amount = self.queue_of(gang), self.snap.unit_need(gang, members)
        return (self.models.within_nominal(queue, model, amount),
                self.models.admissible(queue, model, amount))

    def may_grow(self, gang: Gang, members: Sequence[PodInfo]) -> bool:
        """Whether the gang's queue would admit it into a cluster grown for it: within
        its nominal quota, or borrowing within its limit."""
        return self.ledger.admissible(self.queue_of(gang), self.snap.unit_need(gang, members),
                                      pooled=False) is None

    def admitted(self, gang: Gang, members: Sequence[PodInfo], charge: bool = True,
                 model: Model = None) -> None:
        """Count what the gang takes, on `model`; a new admission (`charge`) also pays
        its entry."""
        queue, amount = self.queue_of(gang), self.snap.need(members)
        self.ledger.add(queue, amount)
        if self.models is not None:
            self.models.add(queue, model, amount)
        if charge and self.state.fair_share is not None:
            self.charges[queue] = (self.charges.get(queue, 0.0)
                                   + self.state.fair_share.entry(amount))

    def backing_off(self, gang: Gang) -> str | None:
        """Why an evicted gang is not considered yet, or None."""
        evicted = self.state.evicted.get(gang.id)
        if evicted is None:
            return None
        left = evicted + self.state.preemption.requeue_backoff - self.now
        return (f"preempted {self.now - evicted:.0f}s ago; back in the queue in {left:.0f}s"
                if left > 0 else None)

    def holds(self, gangs: Iterable[Gang], timeout: float) -> list[Hold]:
        """Room held for gangs that preempted and are not admitted yet: for `timeout`
        after the preemption, long enough for the victims to terminate."""
        by_key = self.cluster.pods
        found = []
        for gang in gangs:
            if gang.started or (record := gang.preemption) is None:
                continue
            if self.now - record.at >= timeout:
                continue
            # A victim is gone once deleted from the API or terminal (the scheduler no
            # longer counts it); one marked for deletion still holds its room.
            there = [pod for v in record.victims
                     if (pod := by_key.get(PodKey.parse(v))) is not None
                     and not pod.terminal and record.names(pod.key, pod.uid)]
            deleted = self.state.deleted
            terminating = tuple(p for p in there if p.deleting or p.uid in deleted)
            remaining, refused = self._recheck(
                gang, [p for p in there if not p.deleting and p.uid not in deleted])
            # The nodes the plan put its members on; the whole domain only for a record
            # that names none. Holding the domain kept its other nodes from every other
            # unit, and two preemptors in one domain each held the other's room.
            nodes = record.nodes or (self.snap.domains(
                gang.members[0], record.topology_key).get(record.domain, [])
                if record.domain and record.topology_key else ())
            found.append(Hold(gang.id, record, frozenset(nodes), remaining, terminating,
                              refused))
        return found

    def _recheck(self, gang: Gang, pods: Sequence[PodInfo]
                 ) -> tuple[tuple[Victim, ...], tuple[tuple[Victim, str], ...]]:
        """The recorded victims still running, as units with their cause, split into
        those that may go and those the checks of a fresh plan now keep, with why. The
        quota arithmetic is not done again: half a gang already gone would count against
        evicting the rest, and a gang goes whole."""
        groups: dict[UnitId, list[PodInfo]] = {}
        for pod in pods:
            of = pod.gang_id
            above = above_minimum(self.cluster, UnitId.of_gang(of)) if of else frozenset()
            groups.setdefault(unit_id(pod, above), []).append(pod)
        quotas, gpus_of, state = self.state.quotas, self.gpus_of, self.state
        units = [unit_of(members, unit, quotas.queue_of(unit.namespace), self.now, gpus_of,
                         restarted(self.cluster, unit, members))
                 for unit, members in groups.items()]
        anchor = min(gang.members, key=lambda p: p.name)
        queue = self.queue_of(gang)
        allowance = {b.name: b.allowed for b in state.budgets}
        allowed: list[Victim] = []
        refused: list[tuple[Victim, str]] = []
        for unit in units:
            by_priority = outranks(unit, gang.priority, state.preemption.may_preempt(anchor))
            why = None
            if unit.pods[0].namespace in state.spared:
                why = "its namespace is out of Airlock's scope"
            elif not state.preemption.enabled:
                why = "preemption is turned off in the policy"
            elif not by_priority and unit.queue == queue and unit.overran is None:
                why = "it no longer has a lower priority than the preemptor"
            elif (budget := _spent(unit, state.budgets, allowance)) is not None:
                why = f"its PodDisruptionBudget {budget} allows no more disruptions"
            if why is None:
                allowed.append(unit._replace(cause="backfill" if unit.overran is not None
                                             else "priority" if by_priority else "reclaim"))
            else:
                refused.append((unit, why))
        return tuple(allowed), tuple(refused)

    def await_victims(self, gang: Gang, hold: Hold) -> Wait:
        """A preemptor whose victims are evicted but not gone: it stays gated, its room
        held (the nodes, and its queue's quota), until they are."""
        members = tuple(gang.waiting)
        record = hold.record
        # The model of the nodes it planned: held of its queue's quota of that model too.
        of_node = self.cluster.models.of_node
        model = next((m for n in record.nodes if (m := of_node.get(n)) is not None), NO_MODEL)
        self.admitted(gang, members, charge=False, model=model)
        where = f"domain {record.domain}" if record.domain else "its nodes"
        return Wait(gang.id, members, "AwaitingVictims",
                    f"{len(members)} pods present; the {len(record.victims)} pods it "
                    f"preempted are not all gone yet (terminating); the room in {where} "
                    f"is held for it until they are")

    def resume(self, gang: Gang, hold: Hold) -> Preempt:
        """Evict what a recorded preemption left running and may still go, for the same
        cause as the leader that decided it would have said."""
        anchor = min(gang.members, key=lambda p: p.name)
        return self._told(Preempt(gang.id, anchor, hold.record, tuple(gang.waiting),
                                  hold.remaining, gang.priority, self.queue_of(gang)))

    def _told(self, preempt: Preempt) -> Preempt:
        """The victims split into those evicted now and those told to checkpoint first."""
        grace, at = self.state.preemption.checkpoint_grace, preempt.record.at
        going, told = due(preempt.victims, at, grace, self.now)
        return dataclasses.replace(preempt, victims=going, noticed=told,
                                   notice_until=deadline(at, grace) if told else None)

    def _waited(self, gang: Gang, members: Sequence[PodInfo]) -> bool:
        """Whether the gang has waited whole for room the delay of its class's policy."""
        complete = gang.completed if gang.whole(members) else max(p.created for p in members)
        anchor = max(members, key=lambda p: p.priority)
        return self.now - complete >= self.state.preemption.delay_for(anchor)

    def may_preempt(self, gang: Gang, members: Sequence[PodInfo]) -> bool:
        return self.state.preemption.enabled and self._waited(gang, members)

    def preempt(self, gang: Gang, members: Sequence[PodInfo], avoid: set[str] | frozenset[str],
                head: bool = False, model: Model = NO_MODEL) -> Preempt | None:
        """Evict the cheapest victims that make the gang fit on GPU `model` (its nodes
        alone are not in `avoid`); the room is then held for it in this round's snapshot
        and ledgers. The `head` of the queue may also evict backfills that overran,
        whatever their priority and queue."""
        if self.plans >= PLANS_PER_ROUND:
            return None
        self.plans += 1
        queue = self.queue_of(gang)
        choice = self._planner().plan(members, queue, avoid, head, self._model_ledger(model),
                                      gang)
        if choice is None:
            return None
        return self._carried_out(gang, members, queue, choice, model)

    def _model_ledger(self, model: Model) -> Ledger | None:
        """The queues' usage of `model`, where policy names models and it is one."""
        return None if self.models is None or model is NO_MODEL else \
            self.models.ledger(model)

    def afresh(self, plans: int) -> int:
        """A forecast's next step: at most `plans` preemptions (up to a round's) planned
        anew, on what runs then; how many it may plan."""
        given = min(plans, PLANS_PER_ROUND)
        self.plans, self._preemptor = PLANS_PER_ROUND - given, None
        return given

    def plans_left(self) -> int:
        return PLANS_PER_ROUND - self.plans

    def _planner(self) -> Preemptor:
        if self._preemptor is None:
            state = self.state
            self._preemptor = Preemptor(self.snap, self.ledger, Candidates(
                self.cluster, state.quotas, self.now, state.preemption, state.budgets,
                state.spared, state.deleted), state.preemption.preferred_premium)
        return self._preemptor

    def may_move(self, gang: Gang, members: Sequence[PodInfo]) -> bool:
        moves = self.state.preemption.moves_per_hour > 0 and self.state.moves_left > 0
        return moves and self._waited(gang, members)

    def move(self, gang: Gang, members: Sequence[PodInfo], avoid: set[str] | frozenset[str],
             model: Model = NO_MODEL) -> Preempt | None:
        """Pods moved out of one domain of the level the gang requires, which then holds
        it (`moving`): only when the free GPUs it may use add up to what it needs."""
        anchor = members[0]
        key = anchor.marks.topology_key
        if key is None or anchor.marks.topology_mode != "required":
            return None
        need = self.snap.need(members)
        usable = [n for n in self.snap.eligible_nodes(anchor) if n not in avoid]
        if self.snap.free_gpus(usable) < need or self.plans >= PLANS_PER_ROUND:
            return None
        self.plans += 1
        domains = {name: [n for n in nodes if n not in avoid]
                   for name, nodes in self.snap.domains(anchor, key).items()}
        settings, planner = self.state.preemption, self._planner()
        found = plan_moves(self.snap, members, domains, planner.units, self.state.budgets,
                           settings.protected_priority_classes, settings.max_moved_share * need,
                           self.state.moves_left)
        if found is None:
            return None
        victims = tuple(v._replace(cause="move") for v in found.victims)
        return self._carried_out(gang, members, self.queue_of(gang), Choice(
            found.domain, key, victims, found.plan, note=(
                f"moving {found.gpus:g} GPUs out of {key} domain {found.domain} frees it "
                f"whole for {need:g}")), model)

    def _carried_out(self, gang: Gang, members: Sequence[PodInfo], queue: str,
                     choice: Choice, model: Model) -> Preempt:
        """The choice committed in the round's snapshot and ledgers, and its action."""
        self.going += self._planner().commit(choice, members, queue,
                                             self._model_ledger(model))
        self.preempting[gang.id] = choice.plan.assignments
        self.evicting.update(v.unit for v in choice.victims)
        pods = [p for v in choice.victims for p in v.pods]
        record = PreemptionRecord(choice.domain, choice.topology_key,
                                  tuple(str(p.key) for p in pods),
                                  tuple(sorted(set(choice.plan.assignments.values()))),
                                  self.now, tuple(p.uid for p in pods))
        anchor = min(members, key=lambda p: p.name)
        return self._told(Preempt(gang.id, anchor, record, tuple(members), choice.victims,
                                  gang.priority, queue, note=choice.note,
                                  nominate=choice.plan.nominations()))

