"""Making room for a gang that cannot fit: which running work to evict, chosen in the
pure core from the snapshot, the queues' usage and the disruption budgets.

Victims come in *units*: a whole gang (every active member, wherever it runs), or a
single pod outside any gang; never part of a gang. A unit may be a victim when
- it runs in the preemptor's queue, at a lower priority, and the preemptor's class may
  preempt (its pods' `preemptionPolicy` is not `Never`); or
- it runs in another queue that is above its nominal, evicting it keeps that queue at or
  above its nominal, and either the priority rule above holds or the preemptor's queue
  *reclaims*: it is below its nominal and stays within it with the gang admitted.
Never a unit with a pod younger than `min_runtime` (or not started), one being deleted,
one already chosen, or one whose PodDisruptionBudgets cannot lose that many pods.

Choosing: per candidate domain (the gang's required topology, else all its nodes), take
units cheapest first (lowest priority, then least work lost, then youngest) until the
gang fits there and within its queue's quota; then drop, most expensive first, every
victim the fit does not need. Among domains, the cheapest set wins: the lowest highest
priority, then the least work lost, then the youngest. Work lost is GPUs times the time
since the pod started, or since the checkpoint it states (`gpu-airlock.io/checkpointed-at`).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim
from webhook.controller.core.costs import Costs
from webhook.controller.core.fitting import Plan, place_in, reserve
from webhook.controller.core.gangs import GangId
from webhook.controller.core.matching import signature
from webhook.controller.core.objects import PodInfo
from webhook.controller.core.quotas import Holdings, Ledger, Quotas
from webhook.controller.core.snapshot import Room, Snapshot, with_pod_slot
from webhook.controller.core.tracking import Tracked

PodKey = tuple[str, str]


@dataclass(frozen=True, slots=True)
class PreemptionSettings:
    enabled: bool = True
    # Pods younger than this are never victims: a job gets to do some work.
    min_runtime: float = 300.0
    # A complete gang waits this long for room before it may preempt: room often frees
    # by itself, and a burst of arrivals should not evict on its first round.
    delay: float = 30.0
    # An evicted gang waits this long before it is considered again, so two gangs never
    # evict each other back and forth.
    requeue_backoff: float = 120.0
    # A running gang short of members this long has the rest evicted (`mending`).
    stale_grace: float = 600.0


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as the shell reads it: how many of `pods` may go now."""

    name: str
    allowed: int
    pods: frozenset[PodKey]


@dataclass(frozen=True, slots=True)
class Choice:
    domain: str | None
    topology_key: str | None
    victims: tuple[Victim, ...]
    plan: Plan

    @property
    def lost(self) -> float:
        return sum(v.lost for v in self.victims)


def _set_cost(victims: Sequence[Victim]) -> tuple[int, float, float, int]:
    return (max(v.priority for v in victims), sum(v.lost for v in victims),
            -min(v.started for v in victims), len(victims))


def outranks(victim: Victim, priority: int, may_preempt: bool) -> bool:
    """Whether a preemptor of `priority`, whose class may preempt or not, outranks the
    victim: its cause is then priority; any other victim the rules let go is reclaimed."""
    return may_preempt and victim.priority < priority


def unit_of(pods: Sequence[PodInfo], gang: GangId | None, queue: str, now: float,
            held: Holdings) -> Victim:
    gpus: GpuEquivalents = 0
    lost = 0.0
    for p in pods:
        if (g := held.get(p.key, 0)):
            gpus += g
            lost += g * max(now - max(p.started, p.checkpointed or 0.0), 0.0)
    return Victim(tuple(pods), gang, queue, max(p.priority for p in pods), gpus, lost,
                  max(p.started for p in pods))


# A unit's name: ("gang", namespace, gang) or ("pod", namespace, pod).
UnitKey = tuple[str, str, str]


def unit_key(pod: PodInfo) -> UnitKey:
    """The unit a bound pod goes with: its gang, or itself."""
    return ("gang", pod.namespace, pod.gang) if pod.gang else ("pod", pod.namespace, pod.name)


class Candidates:
    """The units that could be victims this round, whoever the preemptor, built when a
    plan first looks at their nodes: a round that plans in a few domains of a busy
    cluster never builds the rest. Never a unit in a `spared` namespace (out of
    Airlock's scope), with a pod younger than the minimum runtime (or not started), with
    a member being deleted (the gang is going anyway) or `deleted` by this controller,
    holding no GPUs, or whose PodDisruptionBudgets cannot lose that many pods."""

    def __init__(self, cluster: Tracked, quotas: Quotas, now: float,
                 settings: PreemptionSettings, budgets: Sequence[Budget] = (),
                 spared: Collection[str] = (), deleted: Collection[str] = ()) -> None:
        self.cluster = cluster
        self.queue_of = quotas.queue_of
        self.now = now
        self.young = now - settings.min_runtime
        self.budgets = budgets
        self.allowance = {b.name: b.allowed for b in budgets}
        self.spared = frozenset(spared)
        self.deleted = deleted
        self._built: dict[UnitKey, Victim | None] = {}

    def get(self, key: UnitKey) -> Victim | None:
        try:
            return self._built[key]
        except KeyError:
            found = self._built[key] = self._build(key)
            return found

    def _build(self, key: UnitKey) -> Victim | None:
        kind, namespace, name = key
        if namespace in self.spared:
            return None
        cluster, held, young = self.cluster, self.cluster.held, self.young
        if kind == "pod":
            p = cluster.pods[namespace, name]
            gpus = held.get(p.key, 0)
            if not gpus or not p.started or p.started > young or p.uid in self.deleted:
                return None
            unit = Victim((p,), None, self.queue_of(namespace), p.priority, gpus,
                          gpus * (self.now - max(p.started, p.checkpointed or 0.0)), p.started)
        else:
            gang = namespace, name
            members = cluster.members.get(gang)
            if cluster.deleting[gang] or not members or any(
                    p.uid in self.deleted
                    or (p.key in held and (not p.started or p.started > young))
                    for p in members.values()):
                return None
            unit = unit_of(list(members.values()), gang, self.queue_of(namespace), self.now, held)
            if not unit.gpus:
                return None
        allowance = self.allowance
        return unit if all(_within(unit, b, allowance) for b in self.budgets) else None


def _within(unit: Victim, budget: Budget, allowance: Mapping[str, int]) -> bool:
    hit = sum(1 for p in unit.pods if p.key in budget.pods)
    return not hit or hit <= allowance[budget.name]


# Domains whose victims are chosen exactly (packing, quotas, budgets), after a quick
# estimate ranks them: the exact choice is the expensive part.
EXACT_DOMAINS = 3


@dataclass(frozen=True, slots=True)
class _Usable:
    """A domain's nodes a preemptor may use, and what names them for the rankings: the
    domain, and the nodes kept from it, if any."""

    nodes: list[str]
    key: tuple[object, ...]


# A domain as ranked for planning: the estimate of its cost, its name, the domain.
_Ranked = tuple[tuple[int, float], str, str | None]
# What taking no victim costs (below any priority, no work lost): a domain with room
# enough already ranks before any other.
_NOTHING: tuple[int, float] = (-(2 ** 31), 0.0)


@dataclass(frozen=True, slots=True)
class _Ranking:
    """Units on some nodes, cheapest first, and the GPUs each frees there."""

    order: list[UnitKey]
    each: list[GpuEquivalents]


class Preemptor:
    """Plans preemptions for one round; what it commits is gone from the snapshot, the
    ledger and the budgets, so later gangs in the round neither reuse those victims nor
    take the room they free."""

    def __init__(self, snap: Snapshot, ledger: Ledger, units: Candidates) -> None:
        self.snap = snap
        self.held = units.cluster.held
        self.ledger = ledger
        self.units = units
        self.budgets = units.budgets
        self.allowance = dict(units.allowance)
        self.taken: set[UnitKey] = set()
        self._rankings: dict[tuple[object, ...], _Ranking] = {}
        # Unit -> the rankings it is in, to drop them once the unit is taken.
        self._ranked_in: dict[UnitKey, list[tuple[object, ...]]] = {}
        # Pods of units taken, the nodes they ran on, and the costs of evicting on sets
        # of nodes among those, without them.
        self.gone: set[tuple[str, str]] = set()
        self._gone_on: set[str] = set()
        self._costs_here: dict[tuple[object, ...], Costs] = {}

    def _release(self, unit: Victim, sign: int = -1, room: Room | None = None,
                 here: Collection[str] = ()) -> None:
        """Free (or, with `sign` 1, take back) what the unit's pods hold, in the
        snapshot, and in the `room` of the nodes `here` being tried."""
        free_gpu = self.snap.free_gpu
        for pod in unit.pods:
            node = pod.node_name
            if pod.key in self.held and node in self.snap.free:
                before = free_gpu[node]
                self.snap.take(node, {k: sign * v for k, v in with_pod_slot(pod.requests).items()})
                if room is not None and node in here:
                    room.moved(before, free_gpu[node])

    def _allowed(self, unit: Victim | None, queue: str, priority: int, may_preempt: bool,
                 reclaiming: bool, released: Mapping[str, GpuEquivalents]) -> Victim | None:
        """The unit with its cause, when the preemptor may take it now."""
        if unit is None:
            return None
        by_priority = outranks(unit, priority, may_preempt)
        if unit.queue == queue:
            return unit if by_priority else None
        spec = self.ledger.quotas.spec(unit.queue)
        left = self.ledger.used.get(unit.queue, 0) - released.get(unit.queue, 0) - unit.gpus
        if left < spec.nominal:
            return None  # no eviction pushes a queue below its guarantee
        if by_priority:
            return unit
        if reclaiming:
            return unit._replace(cause="reclaim")
        return None

    def _fits(self, members: Sequence[PodInfo], nodes: Sequence[str], queue: str,
              need: GpuEquivalents, room: Room, released: Mapping[str, GpuEquivalents]
              ) -> Plan | None:
        """Where the gang goes on `nodes`, whose free GPUs `room` keeps, or None."""
        if room.total < need or self.ledger.admissible(queue, need, released) is not None:
            return None
        if not room.could_pack(self._sizes(members)):
            return None
        return place_in(members, self.snap, nodes)

    def _sizes(self, members: Sequence[PodInfo]) -> list[GpuEquivalents]:
        return sorted((self.snap.gpus(p.requests) for p in members), reverse=True)

    def _in_domain(self, members: Sequence[PodInfo], usable: _Usable, queue: str,
                   need: GpuEquivalents) -> tuple[list[Victim], Plan] | None:
        anchor = members[0]
        spec = self.ledger.quotas.spec(queue)
        reclaiming = self.ledger.used.get(queue, 0) + need <= spec.nominal
        keys = [k for k in self._ranking(usable).order if k not in self.taken]
        nodes = usable.nodes
        chosen: list[Victim] = []
        released: dict[str, GpuEquivalents] = {}
        spent: dict[str, int] = {}
        plan: Plan | None = None
        # Free GPUs on the domain's nodes, kept as victims come and go: looking at every
        # node afresh per victim made planning quadratic on a domain of thousands.
        here = frozenset(nodes)
        room = Room(self.snap.free_gpu[n] for n in nodes)
        try:
            for k in keys:
                unit = self._allowed(self.units.get(k), queue, anchor.priority,
                                     anchor.may_preempt, reclaiming, released)
                if unit is None or not self._budgets_allow(unit, spent):
                    continue
                chosen.append(unit)
                self._take(unit, released, spent, room, here)
                plan = self._fits(members, nodes, queue, need, room, released)
                if plan is not None:
                    break
            if plan is None:
                return None
            # A unit with no pod where the plan puts a member can go back without
            # placing the gang again: the plan still holds, and only the quota is asked
            # again. The plan is then made once more, at the end, as placing the gang
            # after each unit would have left it.
            used = set(plan.assignments.values())
            stale = False
            for unit in sorted(chosen, key=lambda u: u.cost, reverse=True):
                self._give_back(unit, released, spent, room, here)
                if used.isdisjoint(p.node_name for p in unit.pods) and \
                        self.ledger.admissible(queue, need, released) is None:
                    stale = True
                elif (trimmed := self._fits(members, nodes, queue, need, room,
                                            released)) is not None:
                    plan, used, stale = trimmed, set(trimmed.assignments.values()), False
                else:
                    self._take(unit, released, spent, room, here)
                    continue
                # By identity: equal units compare pod by pod, field by field.
                chosen = [c for c in chosen if c is not unit]
            if stale:
                plan = self._fits(members, nodes, queue, need, room, released)
                assert plan is not None  # the last plan still holds
            return chosen, plan
        finally:
            for unit in chosen:
                self._release(unit, sign=1)

    @staticmethod
    def _without(domain: tuple[object, ...], nodes: list[str], avoid: Collection[str]
                 ) -> _Usable:
        """The nodes of `domain` (which names the pods' signature, level and domain) but
        those to `avoid` (a few, at most), named for the rankings without a pass over
        thousands of nodes."""
        if not avoid:
            return _Usable(nodes, domain)
        here = set(nodes) if len(avoid) * 8 < len(nodes) else None
        cut = frozenset(n for n in avoid if n in here) if here is not None else \
            frozenset(avoid).intersection(nodes)
        if not cut:
            return _Usable(nodes, domain)
        return _Usable([n for n in nodes if n not in cut], (*domain, cut))

    def _ranking(self, usable: _Usable) -> _Ranking:
        """The units on the nodes, cheapest first, with what each frees there (a gang may
        span domains); the same domains come back for every gang of a round."""
        key, nodes = usable.key, usable.nodes
        found = self._rankings.get(key)
        if found is None:
            here: dict[UnitKey, tuple[Victim, GpuEquivalents]] = {}
            taken, held, units = self.taken, self.held, self.units
            pods, on_node = units.cluster.pods, units.cluster.on_node
            for n in nodes:
                for pod_key in on_node.get(n, ()):
                    if not (gpus := held.get(pod_key, 0)):
                        continue
                    name = unit_key(pods[pod_key])
                    if name in taken or (unit := units.get(name)) is None:
                        continue
                    _, before = here.get(name, (unit, 0))
                    here[name] = unit, before + gpus
            ranked = sorted(((u, k, f) for k, (u, f) in here.items()),
                            # Ties go by name, whatever order the pods were seen in.
                            key=lambda item: (item[0].cost, item[1]))
            found = self._rankings[key] = _Ranking([k for _, k, _ in ranked],
                                                   [f for _, _, f in ranked])
            for unit_name in found.order:
                self._ranked_in.setdefault(unit_name, []).append(key)
        return found

    def _below(self, nodes: Sequence[str], priority: int, shape: tuple[int, GpuEquivalents]
               ) -> bool:
        """Whether `shape` (pods, GPUs of the smallest) could go on `nodes` were every pod
        below `priority` that has run its minimum runtime gone: a necessary condition
        (units, budgets and quotas not yet weighed), node by node."""
        count, smallest = shape
        if smallest <= 0:
            return True
        young, holding, free_gpu = self.units.young, self.units.cluster.holding, \
            self.snap.free_gpu
        fit = 0
        for n in nodes:
            room = max(free_gpu[n], 0)
            for below, started, gpus, _, _ in holding.get(n, ()):
                if below >= priority:
                    break
                if 0 < started <= young:
                    room += gpus
            fit += room // smallest
            if fit >= count:
                return True
        return False

    def _untouched(self, usable: _Usable) -> bool:
        """Whether no victim taken this round ran on the usable nodes."""
        return not self._gone_on or self._gone_on.isdisjoint(usable.nodes)

    def _costs(self, usable: _Usable) -> Costs:
        """What evicting pods on the usable nodes would cost: the tracked cluster's, kept
        between rounds, unless a victim taken this round ran there."""
        units = self.units
        if self._untouched(usable):
            return units.cluster.costs(usable.key, usable.nodes, units.spared)
        found = self._costs_here.get(usable.key)
        if found is None:
            holding, spared, gone = units.cluster.holding, units.spared, self.gone
            found = self._costs_here[usable.key] = Costs(
                h for n in usable.nodes for h in holding.get(n, ())
                if h[3][0] not in spared and h[3] not in gone)
        return found

    def _estimate(self, usable: _Usable, need: GpuEquivalents, queue: str, priority: int,
                  may_preempt: bool, reclaiming: bool) -> tuple[int, float] | None:
        """A quick estimate of what freeing `need` GPUs on the nodes costs: the units
        that may go, cheapest first, until they free enough there (no packing, no queue
        arithmetic, no budgets). A whole gang counts, with its work lost wherever its
        members run: counting its pods here alone ranked a domain held by a young gang
        before one of single pods that would cost less. None when even all of them are
        not enough."""
        deficit = need - self.snap.free_gpus(usable.nodes)
        if deficit <= 0:
            return _NOTHING
        top, lost = _NOTHING
        ranking = self._ranking(usable)
        for name, freed in zip(ranking.order, ranking.each, strict=True):
            unit = self.units.get(name)
            assert unit is not None  # ranked units are built
            if not (outranks(unit, priority, may_preempt)
                    or (reclaiming and unit.queue != queue)):
                continue
            top, lost = max(top, unit.priority), lost + unit.lost
            deficit -= freed
            if deficit <= 0:
                return top, lost
        return None

    def _ranked(self, domains: Mapping[str | None, _Usable], need: GpuEquivalents,
                below: int | None, estimate: Callable[[_Usable], tuple[int, float] | None]
                ) -> list[_Ranked]:
        """The domains the estimate ranks best, in its order: all of them when there are
        no more than are planned exactly, else at least the EXACT_DOMAINS best. The
        estimate walks a domain's units, a pass over its pods; so domains are walked in
        the order of a bound no greater than the estimate (`Costs.bound`, kept between
        rounds), and no more once a bound cannot beat the last of the best: the same
        ranking, from a few walks. A bound at or above priority `below`, if given, rules
        a domain out: pods below it cannot free enough there."""
        if len(domains) <= EXACT_DOMAINS:
            return sorted((cost, str(domain), domain) for domain, usable in domains.items()
                          if (cost := estimate(usable)) is not None)
        now = self.units.now
        bounds: list[_Ranked] = []
        for domain, usable in domains.items():
            deficit = need - self.snap.free_gpus(usable.nodes)
            bound = _NOTHING if deficit <= 0 else \
                self._costs(usable).bound(deficit, now)
            if bound is not None and (below is None or bound[0] < below):
                bounds.append((bound, str(domain), domain))
        bounds.sort()
        best: list[_Ranked] = []
        for bound, name, domain in bounds:
            if len(best) >= EXACT_DOMAINS and (bound, name) > best[EXACT_DOMAINS - 1][:2]:
                break
            cost = estimate(domains[domain])
            if cost is not None:
                bisect.insort(best, (cost, name, domain))
        return best

    def _budgets_allow(self, unit: Victim, spent: Mapping[str, int]) -> bool:
        return all(spent.get(b.name, 0) + sum(1 for p in unit.pods if p.key in b.pods)
                   <= self.allowance[b.name] for b in self.budgets)

    def _take(self, unit: Victim, released: dict[str, GpuEquivalents], spent: dict[str, int],
              room: Room, here: Collection[str]) -> None:
        self._release(unit, room=room, here=here)
        released[unit.queue] = released.get(unit.queue, 0) + unit.gpus
        for b in self.budgets:
            spent[b.name] = spent.get(b.name, 0) + sum(1 for p in unit.pods if p.key in b.pods)

    def _give_back(self, unit: Victim, released: dict[str, GpuEquivalents],
                   spent: dict[str, int], room: Room, here: Collection[str]) -> None:
        self._release(unit, sign=1, room=room, here=here)
        released[unit.queue] -= unit.gpus
        for b in self.budgets:
            spent[b.name] -= sum(1 for p in unit.pods if p.key in b.pods)

    def plan(self, members: Sequence[PodInfo], queue: str, avoid: frozenset[str] | set[str]
             ) -> Choice | None:
        """The cheapest victims that let the whole gang fit, or None."""
        anchor = members[0]
        need = self.snap.need(members)
        reclaiming = self.ledger.used.get(queue, 0) + need <= self.ledger.quotas.spec(
            queue).nominal
        if not anchor.may_preempt and not reclaiming:
            return None  # it may take nothing by priority, and reclaims nothing
        key = anchor.topology_key if anchor.topology_mode == "required" else None
        everywhere = {None: self.snap.eligible_nodes(anchor)}
        sig = signature(anchor)
        shape = len(members), min(self._sizes(members))
        domains = {name: self._without((sig, key, name), nodes, avoid) for name, nodes in
                   (self.snap.domains(anchor, key) if key else everywhere).items()}
        if not reclaiming:
            # Before any unit is built: could room be made at all, below its priority,
            # in one look? Most rounds that look for victims find none.
            count, smallest = shape
            if smallest > 0 and self.units.cluster.room_below(anchor.priority,
                                                              smallest) < count:
                return None

        def estimate(usable: _Usable) -> tuple[int, float] | None:
            # Below its priority, could the pods pack on the nodes, node by node, among
            # pods past their minimum runtime? A necessary condition, and cheaper than
            # a walk of the units.
            if not reclaiming and not self._below(usable.nodes, anchor.priority, shape):
                return None
            return self._estimate(usable, need, queue, anchor.priority, anchor.may_preempt,
                                  reclaiming)

        best: Choice | None = None
        ranked = self._ranked(domains, need, None if reclaiming else anchor.priority,
                              estimate)
        for _, _, domain in ranked[:EXACT_DOMAINS]:
            found = self._in_domain(members, domains[domain], queue, need)
            if found is not None and found[0]:
                victims, plan = found
                if best is None or _set_cost(victims) < _set_cost(best.victims):
                    best = Choice(domain, key, tuple(victims), Plan(domain, plan.assignments))
        return best

    def commit(self, choice: Choice, members: Sequence[PodInfo], queue: str) -> None:
        """The victims are gone and their room is the preemptor's, in this snapshot."""
        for victim in choice.victims:
            taken = unit_key(victim.pods[0])
            self.taken.add(taken)
            # Rankings that hold it are made again without it.
            for key in self._ranked_in.pop(taken, ()):
                self._rankings.pop(key, None)
            for pod in victim.pods:
                self.gone.add(pod.key)
                self._gone_on.add(pod.node_name or "")
            self._costs_here.clear()
            self._release(victim)
            self.ledger.add(victim.queue, -victim.gpus)
            for b in self.budgets:
                self.allowance[b.name] -= sum(1 for p in victim.pods if p.key in b.pods)
        reserve(choice.plan, members, self.snap)
        self.ledger.add(queue, self.snap.need(members))
