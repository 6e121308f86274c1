"""Making room for a gang that cannot fit: which running work to evict, chosen in the pure
core from the snapshot, the queues' usage and the disruption budgets, by the victim order
(`criteria`) over the units that may go (`candidates`).

A unit may be a victim of a preemptor when
- it runs in the preemptor's queue, at a lower priority, and the preemptor's class may
  preempt (its class's `preempts`, else its pods' `preemptionPolicy` is not `Never`); or
- it runs in another queue that is above its nominal, evicting it keeps that queue at or
  above its nominal, and either the priority rule above holds or the preemptor's queue
  *reclaims*: it is below its nominal and stays within it with the gang admitted. Where
  the gang takes a GPU model, these nominals are the queues' quotas of that model
  (`Quota`): borrowing of one model is reclaimed on that model only;
and the budgets that cover its pods can lose them. The head of the queue may also take a
unit backfilled onto its room that ran past its expected end, whatever its priority and
queue (`criteria.overran`), when its class may preempt.

Choosing: per candidate domain (the gang's required topology, else all its nodes), take
units cheapest first until the gang fits there and within its queue's quota; then drop,
most expensive first, every victim the fit does not need. Among domains, the cheapest set
wins (`criteria.set_cost`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim, lost_of
from webhook.controller.core.cluster.capacity import Room, with_pod_slot
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import GangId, PodKey
from webhook.controller.core.placement.packing import Plan, place_in, take_plan
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.candidates import Candidates
from webhook.controller.core.preemption.criteria import (
    cost,
    outranks,
    set_cost,
    whole_domain_worth,
)
from webhook.controller.core.preemption.ranking import EXACT_DOMAINS, Rankings, Usable
from webhook.controller.core.queues.quotas import Ledger


def release(snap: Snapshot, unit: Victim, gpus_of: Collection[PodKey], sign: int = -1,
            room: Room | None = None, here: Collection[str] = (),
            only: Collection[str] | None = None) -> list[PodInfo]:
    """Free in `snap` (or, with `sign` 1, take back) what the unit's pods that hold GPUs
    (`gpus_of`) hold, and in the `room` of the nodes `here` being tried; with `only`,
    only on those nodes, and the pods left holding theirs elsewhere are returned."""
    free_gpu = snap.free_gpu
    left = []
    for pod in unit.pods:
        node = pod.node_name
        if pod.key in gpus_of and node in snap.free:
            if only is not None and node not in only:
                left.append(pod)
                continue
            before = free_gpu[node]
            snap.take(node, {k: sign * v for k, v in with_pod_slot(pod.requests).items()})
            if room is not None and node in here:
                room.moved(before, free_gpu[node])
    return left


@dataclass(frozen=True, slots=True)
class Choice:
    domain: str | None
    topology_key: str | None
    victims: tuple[Victim, ...]
    plan: Plan
    # Why this domain, or none, for a gang that prefers one (its events say).
    note: str = ""

    @property
    def lost(self) -> float:
        return lost_of(self.victims)


@dataclass(frozen=True, slots=True)
class Quota:
    """The usage a plan is judged by: the queues' over all GPUs, and, where the gang takes
    a GPU model, the queues' of that model. With a model, whether the gang reclaims and
    which victims' queues stay at their guarantee are of that model alone: a queue that
    borrows A100s but keeps to its H100 quota loses no H100 work, and one short of its
    H100 quota reclaims H100s though it uses its quota over all models. The gang is
    admitted only where both would admit it."""

    queues: Ledger
    model: Ledger | None = None

    @property
    def guarantees(self) -> Ledger:
        return self.queues if self.model is None else self.model

    def reclaiming(self, queue: str, need: GpuEquivalents) -> bool:
        """Whether the queue stays within its nominal with `need` more: it reclaims."""
        ledger = self.guarantees
        return ledger.used.get(queue, 0) + need <= ledger.quotas.spec(queue).nominal

    def admissible(self, queue: str, need: GpuEquivalents,
                   released: Mapping[str, GpuEquivalents]) -> str | None:
        why = self.queues.admissible(queue, need, released)
        if why is None and self.model is not None:
            why = self.model.admissible(queue, need, released)
        return why

    def add(self, queue: str, amount: GpuEquivalents) -> None:
        self.queues.add(queue, amount)
        if self.model is not None:
            self.model.add(queue, amount)


@dataclass(slots=True)
class _Trial:
    """Victims tried in one domain. On a fork of the snapshot: whatever is tried leaves the
    round as it was."""

    snap: Snapshot
    nodes: Sequence[str]
    here: frozenset[str]
    # Free GPUs on the domain's nodes, kept as victims come and go: looking at every node
    # afresh per victim made planning quadratic on a domain of thousands.
    room: Room
    # GPUs each member asks, most first.
    sizes: Sequence[GpuEquivalents]
    # What the victims tried so far give back to each queue, and take from each budget.
    released: dict[str, GpuEquivalents] = field(default_factory=dict)
    spent: dict[str, int] = field(default_factory=dict)


class Preemptor:
    """Plans preemptions for one round; what it commits is gone from the snapshot, the
    ledger and the budgets, so later gangs in the round neither reuse those victims nor
    take the room they free."""

    def __init__(self, snap: Snapshot, ledger: Ledger, units: Candidates,
                 premium: float = 1.5) -> None:
        self.snap = snap
        self.premium = premium
        self.gpus_of = units.cluster.occupancy.gpus_of
        self.ledger = ledger
        # The plan under way's (`plan`).
        self.quota = Quota(ledger)
        self.units = units
        self.budgets = units.budgets
        self.allowance = dict(units.allowance)
        self.rankings = Rankings(snap, units)

    def _free(self, snap: Snapshot, unit: Victim, sign: int = -1, room: Room | None = None,
              here: Collection[str] = ()) -> None:
        release(snap, unit, self.gpus_of, sign, room, here)

    def _allowed(self, unit: Victim | None, queue: str, priority: int, may_preempt: bool,
                 reclaiming: bool, released: Mapping[str, GpuEquivalents], head: bool
                 ) -> Victim | None:
        """The unit with its cause, when the preemptor may take it now."""
        if unit is None:
            return None
        if head and may_preempt and unit.overran is not None:
            return unit._replace(cause="backfill")
        by_priority = outranks(unit, priority, may_preempt)
        if unit.queue == queue:
            return unit if by_priority else None
        guarantees = self.quota.guarantees
        spec = guarantees.quotas.spec(unit.queue)
        left = guarantees.used.get(unit.queue, 0) - released.get(unit.queue, 0) - unit.gpus
        if left < spec.nominal:
            return None  # no eviction pushes a queue below its guarantee
        if by_priority:
            return unit
        if reclaiming:
            return unit._replace(cause="reclaim")
        return None

    def _fits(self, t: _Trial, members: Sequence[PodInfo], queue: str, need: GpuEquivalents
              ) -> Plan | None:
        """Where the gang goes on the trial's nodes, or None."""
        if t.room.total < need or self.quota.admissible(queue, need, t.released) is not None:
            return None
        if not t.room.could_pack(t.sizes):
            return None
        return place_in(members, t.snap, t.nodes)

    def _sizes(self, members: Sequence[PodInfo]) -> list[GpuEquivalents]:
        return sorted((self.snap.gpus(p.requests) for p in members), reverse=True)

    def _in_domain(self, members: Sequence[PodInfo], usable: Usable, queue: str,
                   need: GpuEquivalents, sizes: Sequence[GpuEquivalents], head: bool
                   ) -> tuple[list[Victim], Plan] | None:
        nodes = usable.nodes
        t = _Trial(self.snap.fork(), nodes, frozenset(nodes),
                   Room(self.snap.free_gpu[n] for n in nodes), sizes)
        found = self._gather(t, members, usable, queue, need, head)
        return None if found is None else self._trim(t, members, queue, need, *found)

    def _gather(self, t: _Trial, members: Sequence[PodInfo], usable: Usable, queue: str,
                need: GpuEquivalents, head: bool) -> tuple[list[Victim], Plan] | None:
        """Units taken cheapest first, until the gang fits: them and the plan, or None."""
        anchor = members[0]
        reclaiming = self.quota.reclaiming(queue, need)
        keys = [k for k in self.rankings.ranking(usable).order if k not in self.rankings.taken]
        chosen: list[Victim] = []
        # Pods of a gang taken one by one (an elastic gang's above its minimum), by gang:
        # looking through every unit chosen made a plan over thousands quadratic.
        alone: dict[GangId | None, list[Victim]] = {}
        may_preempt = self.units.settings.may_preempt(anchor)
        for k in keys:
            unit = self._allowed(self.units.get(k), queue, anchor.priority, may_preempt,
                                 reclaiming, t.released, head)
            if unit is None:
                continue
            # An elastic gang whose pods above its minimum were taken one by one, now
            # taken whole: the gang stands for them, and they are not freed twice.
            inside = {p.key for p in unit.pods}
            subsumed = [c for c in alone.get(unit.pods[0].gang_id, ())
                        if all(p.key in inside for p in c.pods)] if unit.unit.kind == "gang" \
                else []
            for c in subsumed:
                self._give_back(t, c)
            if not self._budgets_allow(unit, t.spent):
                for c in subsumed:
                    self._take(t, c)
                continue
            if subsumed:
                gone = {id(c) for c in subsumed}
                chosen = [c for c in chosen if id(c) not in gone]
            elif unit.unit.kind == "pod" and unit.pods[0].gang_id is not None:
                alone.setdefault(unit.pods[0].gang_id, []).append(unit)
            chosen.append(unit)
            self._take(t, unit)
            plan = self._fits(t, members, queue, need)
            if plan is not None:
                return chosen, plan
        return None

    def _trim(self, t: _Trial, members: Sequence[PodInfo], queue: str, need: GpuEquivalents,
              chosen: list[Victim], plan: Plan) -> tuple[list[Victim], Plan]:
        """Every victim the gang does not need given back, the most expensive first.

        A unit with no pod where the plan puts a member can go back without placing the
        gang again: the plan still holds, and only the quota is asked again. The plan is
        then made once more, at the end, as placing the gang after each unit would have
        left it."""
        used = set(plan.assignments.values())
        stale = False
        # By identity: equal units compare pod by pod, field by field. Dropped at the end:
        # one list rebuilt per unit given back made a plan over thousands quadratic.
        back: set[int] = set()
        for unit in sorted(chosen, key=cost, reverse=True):
            self._give_back(t, unit)
            if used.isdisjoint(p.node_name for p in unit.pods) and \
                    self.quota.admissible(queue, need, t.released) is None:
                stale = True
            elif (trimmed := self._fits(t, members, queue, need)) is not None:
                plan, used, stale = trimmed, set(trimmed.assignments.values()), False
            else:
                self._take(t, unit)
                continue
            back.add(id(unit))
        chosen = [c for c in chosen if id(c) not in back]
        if stale:
            found = self._fits(t, members, queue, need)
            assert found is not None  # the last plan still holds
            plan = found
        return chosen, plan

    def _budgets_allow(self, unit: Victim, spent: Mapping[str, int]) -> bool:
        return all(spent.get(b.name, 0) + sum(1 for p in unit.pods if p.key in b.pods)
                   <= self.allowance[b.name] for b in self.budgets)

    def _take(self, t: _Trial, unit: Victim) -> None:
        self._free(t.snap, unit, room=t.room, here=t.here)
        t.released[unit.queue] = t.released.get(unit.queue, 0) + unit.gpus
        for b in self.budgets:
            t.spent[b.name] = t.spent.get(b.name, 0) + sum(1 for p in unit.pods
                                                           if p.key in b.pods)

    def _give_back(self, t: _Trial, unit: Victim) -> None:
        self._free(t.snap, unit, sign=1, room=t.room, here=t.here)
        t.released[unit.queue] -= unit.gpus
        for b in self.budgets:
            t.spent[b.name] -= sum(1 for p in unit.pods if p.key in b.pods)

    def plan(self, members: Sequence[PodInfo], queue: str, avoid: frozenset[str] | set[str],
             head: bool = False, model: Ledger | None = None,
             gang: Gang | None = None) -> Choice | None:
        """The cheapest victims that let the whole gang fit, or None; the `head` of the
        queue may take backfills that overran too. `model`: the queues' usage of the GPU
        model the gang takes (`avoid` keeps it to that model's nodes). The `gang` the
        members are of, if given, keeps what they need: most plans end at the glance
        below, and counting a hundred pods' GPUs there was most of their cost."""
        anchor = members[0]
        snap = self.snap
        need = snap.need(members) if gang is None else snap.unit_need(gang, members)
        self.quota = Quota(self.ledger, model)
        reclaiming = self.quota.reclaiming(queue, need)
        may_preempt = self.units.settings.may_preempt(anchor)
        if not may_preempt and not reclaiming:
            return None  # it may take nothing by priority, and reclaims nothing
        key = anchor.marks.topology_key if anchor.marks.topology_mode == "required" else None
        sizes = gang.sizes(snap.accelerators) if gang is not None and gang.whole(members) \
            else self._sizes(members)
        shape = len(members), sizes[-1]
        avoid = frozenset(avoid)  # once, not once per domain (`Rankings.without`)
        # Nodes where backfills that overran run: the glance below counts by priority,
        # and such a unit goes first whatever its priority.
        late = self.units.overran_nodes if head else frozenset()
        if not reclaiming and not late:
            # Before any unit is built: could room be made at all, below its priority,
            # in one look? Most rounds that look for victims find none.
            count, smallest = shape
            if smallest > 0 and self.units.cluster.room_below(anchor.priority,
                                                              smallest) < count:
                return None
        best = self._cheapest(members, queue, need, sizes, head, key, avoid, reclaiming)
        preferred = anchor.marks.topology_key \
            if anchor.marks.topology_mode == "preferred" else None
        if best is None or preferred is None:
            return best
        # A gang that prefers one domain: room made in one costs more than room made
        # anywhere, and is worth it up to the premium (never at a higher priority).
        whole = self._cheapest(members, queue, need, sizes, head, preferred, avoid,
                               reclaiming)
        if whole is None:
            return dataclasses.replace(best, note=f"no {preferred} domain could be freed for "
                                       f"it; spread over several")
        if not whole_domain_worth(whole.victims, best.victims, self.premium):
            return dataclasses.replace(best, note=_compared(whole, best, preferred, False))
        return dataclasses.replace(whole, note=_compared(whole, best, preferred, True))

    def _cheapest(self, members: Sequence[PodInfo], queue: str, need: GpuEquivalents,
                  sizes: Sequence[GpuEquivalents], head: bool, key: str | None,
                  avoid: frozenset[str] | set[str], reclaiming: bool) -> Choice | None:
        """The cheapest victims in one domain of level `key` (None: anywhere), for
        members asking `sizes` GPUs (most first)."""
        anchor = members[0]
        shape = len(sizes), sizes[-1]
        nodes = self.snap.nodes
        domains = Rankings.usable(
            self.snap.domains(anchor, key).items() if key else
            [(None, self.snap.eligible_nodes(anchor))],
            (anchor.constraints.signature, key), avoid, self.snap.eligible_set(anchor),
            (lambda n: nodes[n].labels.get(key)) if key else lambda _: None)
        overran = self.units.overran_nodes
        late = overran if head else frozenset()
        may_preempt = self.units.settings.may_preempt(anchor)

        def estimate(usable: Usable) -> tuple[int, float] | None:
            # Below its priority, could the pods pack on the nodes, node by node, among
            # pods past their minimum runtime? A necessary condition, and cheaper than
            # a walk of the units.
            if not reclaiming and (not late or late.isdisjoint(usable.nodes)) and \
                    not self.rankings.below(usable.nodes, anchor.priority, shape):
                return None
            return self.rankings.estimate(usable, need, queue, anchor.priority,
                                          may_preempt, reclaiming, head)

        best: Choice | None = None
        ranked = self.rankings.ranked(domains, need, None if reclaiming else anchor.priority,
                                      estimate, overran)
        for _, _, domain in ranked[:EXACT_DOMAINS]:
            found = self._in_domain(members, domains[domain], queue, need, sizes, head)
            if found is not None and found[0]:
                victims, plan = found
                if best is None or set_cost(victims) < set_cost(best.victims):
                    best = Choice(domain, key, tuple(victims), Plan(domain, plan.assignments))
        return best

    def commit(self, choice: Choice, members: Sequence[PodInfo], queue: str,
               model: Ledger | None = None) -> list[PodInfo]:
        """The victims go: their room on the nodes the preemptor takes is its own, in
        this snapshot, and their usage leaves the ledgers (`model`: of the GPU model it
        takes). Their room elsewhere is still theirs until they are gone, as
        kube-scheduler counts it: those pods are returned."""
        quota = Quota(self.ledger, model)
        mine = set(choice.plan.assignments.values())
        left = []
        for victim in choice.victims:
            self.rankings.take(victim)
            left += release(self.snap, victim, self.gpus_of, only=mine)
            quota.add(victim.queue, -victim.gpus)
            for b in self.budgets:
                self.allowance[b.name] -= sum(1 for p in victim.pods if p.key in b.pods)
        take_plan(choice.plan, members, self.snap)
        quota.add(queue, self.snap.need(members))
        return left


def _compared(whole: Choice, spread: Choice, level: str, took: bool) -> str:
    """Why a gang that prefers a domain got one, or did not, in its event."""
    costs = (f"{whole.lost / 3600:.1f} GPU-hours lost in {level} domain {whole.domain} "
             f"against {spread.lost / 3600:.1f} spread")
    return (f"its preferred {level} domain {whole.domain}: {costs}, within the premium"
            if took else f"spread: {costs} is more than the premium allows")
