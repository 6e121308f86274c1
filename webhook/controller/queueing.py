"""The queues' part of a round: the order gangs are considered in (priority, fair share,
arrival), quota checks, when a gang may preempt, and the room held for a preemptor
until it is admitted. Pure; `deciding` calls it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.controller.actions import Preempt, PreemptionRecord, Wait
from webhook.controller.fairsharing import FairShare
from webhook.controller.gangs import Gang, GangId
from webhook.controller.objects import PodInfo
from webhook.controller.ordering import queue_order
from webhook.controller.preempting import (
    Budget,
    Candidates,
    PreemptionSettings,
    Preemptor,
    outranks,
    unit_of,
)
from webhook.controller.quotas import Ledger, Quotas
from webhook.controller.snapshot import Snapshot

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
    evicted: Mapping[GangId, float] = field(default_factory=dict)
    # Namespaces out of Airlock's scope (kube-system, its own, the policy's exclusions):
    # nothing there is ever preempted.
    spared: frozenset[str] = frozenset()
    # Since when each running gang has been short of members (`mending`).
    short_since: Mapping[GangId, float] = field(default_factory=dict)
    # Uids of pods this controller deleted that the watch may not have reported yet.
    deleted: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Hold:
    """Room held for a gang that preempted: nobody else may use `nodes`."""

    gang: GangId
    record: PreemptionRecord
    nodes: frozenset[str]
    # Recorded victims still running: the eviction is not done (a leader died).
    remaining: tuple[PodInfo, ...]
    # Recorded victims evicted but still there, terminating: kube-scheduler still counts
    # their room, so the gang stays gated until they are gone (lifted now, the members
    # that fit would bind and the rest wait: half a gang holding GPUs).
    terminating: tuple[PodInfo, ...] = ()


def _record(gang: Gang) -> PreemptionRecord | None:
    for pod in gang.members:
        if pod.preemption and (record := PreemptionRecord.loads(pod.preemption)):
            return record
    return None


def _key(name: str) -> tuple[str, str]:
    namespace, _, pod = name.partition("/")
    return namespace, pod


class Queueing:
    def __init__(self, state: QueueState, snap: Snapshot, now: float) -> None:
        self.state = state
        self.snap = snap
        self.cluster = snap.cluster
        self.now = now
        self.held = self.cluster.held
        self.ledger = Ledger(state.quotas, self.cluster.namespace_gpus, self.cluster.capacity)
        self.charges: dict[str, float] = {}
        self._preemptor: Preemptor | None = None
        self.plans = 0

    def queue_of(self, gang: Gang) -> str:
        return self.state.quotas.queue_of(gang.id[0])

    def share(self, queue: str) -> float:
        fair = self.state.fair_share
        if fair is None:
            return 0.0
        weight = self.state.quotas.spec(queue).weight
        return fair.share(queue, weight) + self.charges.get(queue, 0.0) / weight

    def order(self, gangs: Iterable[Gang]) -> Iterator[Gang]:
        return queue_order(gangs, self.queue_of, self.share)

    def over_quota(self, gang: Gang, members: Sequence[PodInfo]) -> str | None:
        return self.ledger.admissible(self.queue_of(gang), self.snap.need(members))

    def admitted(self, gang: Gang, members: Sequence[PodInfo], charge: bool = True) -> None:
        """Count what the gang takes; a new admission (`charge`) also pays its entry."""
        queue, amount = self.queue_of(gang), self.snap.need(members)
        self.ledger.add(queue, amount)
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
            if gang.started or (record := _record(gang)) is None:
                continue
            if self.now - record.at >= timeout:
                continue
            # A victim is gone once deleted from the API or terminal (the scheduler no
            # longer counts it); one marked for deletion still holds its room.
            there = [pod for v in record.victims if (pod := by_key.get(_key(v))) is not None
                     and not pod.terminal and record.names(pod)]
            deleted = self.state.deleted
            remaining = tuple(p for p in there if not p.deleting and p.uid not in deleted)
            terminating = tuple(p for p in there if p.deleting or p.uid in deleted)
            nodes = (self.snap.domains(gang.members[0], record.topology_key).get(
                record.domain, []) if record.domain and record.topology_key else record.nodes)
            found.append(Hold(gang.id, record, frozenset(nodes), remaining, terminating))
        return found

    def await_victims(self, gang: Gang, hold: Hold) -> Wait:
        """A preemptor whose victims are evicted but not gone: it stays gated, its room
        held (the nodes, and its queue's quota), until they are."""
        members = tuple(gang.waiting)
        self.admitted(gang, members, charge=False)
        record = hold.record
        where = f"domain {record.domain}" if record.domain else "its nodes"
        return Wait(gang.id, members, "Waiting",
                    f"{len(members)} pods present; the {len(record.victims)} pods it "
                    f"preempted are not all gone yet (terminating); the room in {where} "
                    f"is held for it until they are")

    def resume(self, gang: Gang, hold: Hold) -> Preempt:
        """Evict what a recorded preemption left running, for the same cause as the
        leader that decided it would have said."""
        groups: dict[GangId | None, list[PodInfo]] = {}
        for pod in hold.remaining:
            groups.setdefault(pod.gang_id, []).append(pod)
        quotas = self.state.quotas
        held = self.held
        units = [unit_of(pods, g, quotas.queue_of(pods[0].namespace), self.now, held)
                 for g, pods in groups.items() if g is not None]
        units += [unit_of([p], None, quotas.queue_of(p.namespace), self.now, held)
                  for p in groups.get(None, ())]
        anchor = min(gang.members, key=lambda p: p.name)
        victims = tuple(u._replace(
            cause="priority" if outranks(u, gang.priority, anchor.may_preempt) else "reclaim")
            for u in units)
        return Preempt(gang.id, anchor, hold.record, tuple(gang.waiting), victims,
                       gang.priority, self.queue_of(gang))

    def may_preempt(self, members: Sequence[PodInfo]) -> bool:
        settings = self.state.preemption
        complete = max(p.created for p in members)
        return settings.enabled and self.now - complete >= settings.delay

    def preempt(self, gang: Gang, members: Sequence[PodInfo], avoid: set[str] | frozenset[str]
                ) -> Preempt | None:
        """Evict the cheapest victims that make the gang fit; the room is then held for
        it in this round's snapshot and ledger."""
        if self.plans >= PLANS_PER_ROUND:
            return None
        self.plans += 1
        if self._preemptor is None:
            state = self.state
            self._preemptor = Preemptor(self.snap, self.ledger, Candidates(
                self.cluster, state.quotas, self.now, state.preemption, state.budgets,
                state.spared, state.deleted))
        queue = self.queue_of(gang)
        choice = self._preemptor.plan(members, queue, avoid)
        if choice is None:
            return None
        self._preemptor.commit(choice, members, queue)
        pods = [p for v in choice.victims for p in v.pods]
        record = PreemptionRecord(choice.domain, choice.topology_key,
                                  tuple(f"{p.namespace}/{p.name}" for p in pods),
                                  tuple(sorted(set(choice.plan.assignments.values()))),
                                  self.now, tuple(p.uid for p in pods))
        anchor = min(members, key=lambda p: p.name)
        return Preempt(gang.id, anchor, record, tuple(members), choice.victims,
                       gang.priority, queue)

