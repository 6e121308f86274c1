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

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.controller.actions import Victim
from webhook.controller.fitting import Plan, place_in, reserve
from webhook.controller.gangs import GangId
from webhook.controller.objects import PodInfo
from webhook.controller.quotas import Holdings, Ledger, Quotas
from webhook.controller.snapshot import Snapshot, with_pod_slot

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


def candidates(pods: Iterable[PodInfo], quotas: Quotas, now: float,
               settings: PreemptionSettings, held: Holdings, budgets: Sequence[Budget] = (),
               spared: Collection[str] = ()) -> list[Victim]:
    """Every unit that could ever be a victim this round, whoever the preemptor. Pods in
    `spared` namespaces (those policy puts out of Airlock's scope) never are."""
    gangs: dict[GangId, list[PodInfo]] = {}
    singles: list[PodInfo] = []
    broken: set[GangId] = set()  # a member being deleted: the gang is going anyway
    for pod in pods:
        if pod.namespace in spared:
            continue
        gang = pod.gang_id
        if gang is not None:
            if pod.deleting:
                broken.add(gang)
            elif pod.active:
                gangs.setdefault(gang, []).append(pod)
        elif pod.key in held:
            singles.append(pod)
    young = now - settings.min_runtime
    queue_of = quotas.queue_of
    # Single pods are most of a busy cluster: built directly, young ones never built.
    units = [Victim((p,), None, queue_of(p.namespace), p.priority, held[p.key],
                    held[p.key] * (now - max(p.started, p.checkpointed or 0.0)), p.started)
             for p in singles if p.started and p.started <= young]
    units += [unit_of(members, gang, queue_of(gang[0]), now, held)
              for gang, members in gangs.items() if gang not in broken and not any(
                  p.key in held and (not p.started or p.started > young) for p in members)]
    allowance = {b.name: b.allowed for b in budgets}

    def eligible(unit: Victim) -> bool:
        if not unit.gpus:
            return False
        return all(_within(unit, b, allowance) for b in budgets)
    return [u for u in units if eligible(u)]


def _within(unit: Victim, budget: Budget, allowance: Mapping[str, int]) -> bool:
    hit = sum(1 for p in unit.pods if p.key in budget.pods)
    return not hit or hit <= allowance[budget.name]


# Domains whose victims are chosen exactly (packing, quotas, budgets), after a quick
# estimate ranks them all: the exact choice is the expensive part.
EXACT_DOMAINS = 3


def _could_pack(sizes: Sequence[GpuEquivalents], free: Sequence[GpuEquivalents]) -> bool:
    """Whether pods of `sizes` GPUs (largest first) could go on nodes with `free` GPUs,
    counting GPUs only: a necessary condition, cheap enough to test before packing."""
    left = list(free)
    for size in sizes:
        for i, room in enumerate(left):
            if room >= size:
                left[i] = room - size
                break
        else:
            return False
    return True


class Preemptor:
    """Plans preemptions for one round; what it commits is gone from the snapshot, the
    ledger and the budgets, so later gangs in the round neither reuse those victims nor
    take the room they free."""

    def __init__(self, snap: Snapshot, ledger: Ledger, units: list[Victim], held: Holdings,
                 budgets: Sequence[Budget] = ()) -> None:
        self.snap = snap
        self.held = held
        self.ledger = ledger
        self.units = units
        self.budgets = budgets
        self.allowance = {b.name: b.allowed for b in budgets}
        self._by_node: dict[str, list[int]] = {}
        for i, unit in enumerate(units):
            for pod in unit.pods:
                if pod.node_name:
                    self._by_node.setdefault(pod.node_name, []).append(i)
        self.taken: set[int] = set()
        self._ranked: dict[tuple[str, ...], list[int]] = {}

    def _release(self, unit: Victim, sign: int = -1) -> None:
        for pod in unit.pods:
            if pod.key in self.held and pod.node_name in self.snap.free:
                need = with_pod_slot(pod.requests)
                self.snap.take(pod.node_name,
                               {k: sign * v for k, v in need.items()})

    def _allowed(self, unit: Victim, queue: str, priority: int, may_preempt: bool,
                 reclaiming: bool, released: Mapping[str, GpuEquivalents]) -> Victim | None:
        """The unit with its cause, when the preemptor may take it now."""
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
            return Victim(unit.pods, unit.gang, unit.queue, unit.priority, unit.gpus,
                          unit.lost, unit.started, "reclaim")
        return None

    def _fits(self, members: Sequence[PodInfo], nodes: Sequence[str], queue: str,
              need: GpuEquivalents, released: Mapping[str, GpuEquivalents]) -> Plan | None:
        free_gpu = self.snap.free_gpu
        if sum(max(free_gpu[n], 0) for n in nodes) < need:
            return None
        if not _could_pack(self._sizes(members), sorted((free_gpu[n] for n in nodes),
                                                         reverse=True)):
            return None
        if self.ledger.admissible(queue, need, released) is not None:
            return None
        return place_in(members, self.snap, nodes)

    def _sizes(self, members: Sequence[PodInfo]) -> list[GpuEquivalents]:
        return sorted((self.snap.gpus(p.requests) for p in members), reverse=True)

    def _in_domain(self, members: Sequence[PodInfo], nodes: Sequence[str], queue: str,
                   need: GpuEquivalents) -> tuple[list[Victim], Plan] | None:
        anchor = members[0]
        spec = self.ledger.quotas.spec(queue)
        reclaiming = self.ledger.used.get(queue, 0) + need <= spec.nominal
        indices = sorted({i for n in nodes for i in self._by_node.get(n, ())
                          if i not in self.taken}, key=lambda i: self.units[i].cost)
        chosen: list[Victim] = []
        released: dict[str, GpuEquivalents] = {}
        spent: dict[str, int] = {}
        plan: Plan | None = None
        try:
            for i in indices:
                unit = self._allowed(self.units[i], queue, anchor.priority,
                                     anchor.may_preempt, reclaiming, released)
                if unit is None or not self._budgets_allow(unit, spent):
                    continue
                chosen.append(unit)
                self._take(unit, released, spent)
                plan = self._fits(members, nodes, queue, need, released)
                if plan is not None:
                    break
            if plan is None:
                return None
            for unit in sorted(chosen, key=lambda u: u.cost, reverse=True):
                self._give_back(unit, released, spent)
                trimmed = self._fits(members, nodes, queue, need, released)
                if trimmed is None:
                    self._take(unit, released, spent)
                else:
                    chosen.remove(unit)
                    plan = trimmed
            return chosen, plan
        finally:
            for unit in chosen:
                self._release(unit, sign=1)

    def _estimate(self, nodes: Sequence[str], need: GpuEquivalents, queue: str, priority: int,
                  may_preempt: bool) -> tuple[int, float] | None:
        """A quick lower bound of what freeing `need` GPUs on `nodes` costs: the cheapest
        units that may go, counted by GPUs alone (no packing, no queue arithmetic); None
        when even all of them are not enough."""
        free_gpu = self.snap.free_gpu
        deficit = need - sum(max(free_gpu[n], 0) for n in nodes)
        top, lost = -(2 ** 31), 0.0
        if deficit <= 0:
            return top, lost
        units = self.units
        spec = self.ledger.quotas.spec(queue)
        reclaiming = self.ledger.used.get(queue, 0) + need <= spec.nominal
        here = set(nodes)
        held = self.held
        key = tuple(nodes)
        ranked = self._ranked.get(key)
        if ranked is None:
            # The same domains come back for every gang of a round: sort each once.
            ranked = self._ranked[key] = sorted(
                {i for n in nodes for i in self._by_node.get(n, ())}, key=self._cost_of)
        for i in ranked:
            unit = units[i]
            lower = may_preempt and unit.priority < priority
            if i in self.taken or not (lower or (reclaiming and unit.queue != queue)):
                continue
            top, lost = max(top, unit.priority), lost + unit.lost
            deficit -= sum(held.get(p.key, 0) for p in unit.pods if p.node_name in here)
            if deficit <= 0:
                return top, lost
        return None

    def _cost_of(self, i: int) -> tuple[int, float, float]:
        return self.units[i].cost

    def _budgets_allow(self, unit: Victim, spent: Mapping[str, int]) -> bool:
        return all(spent.get(b.name, 0) + sum(1 for p in unit.pods if p.key in b.pods)
                   <= self.allowance[b.name] for b in self.budgets)

    def _take(self, unit: Victim, released: dict[str, GpuEquivalents], spent: dict[str, int]
              ) -> None:
        self._release(unit)
        released[unit.queue] = released.get(unit.queue, 0) + unit.gpus
        for b in self.budgets:
            spent[b.name] = spent.get(b.name, 0) + sum(1 for p in unit.pods if p.key in b.pods)

    def _give_back(self, unit: Victim, released: dict[str, GpuEquivalents],
                   spent: dict[str, int]) -> None:
        self._release(unit, sign=1)
        released[unit.queue] -= unit.gpus
        for b in self.budgets:
            spent[b.name] -= sum(1 for p in unit.pods if p.key in b.pods)

    def plan(self, members: Sequence[PodInfo], queue: str, avoid: frozenset[str] | set[str]
             ) -> Choice | None:
        """The cheapest victims that let the whole gang fit, or None."""
        anchor = members[0]
        need = self.snap.need(members)
        key = anchor.topology_key if anchor.topology_mode == "required" else None
        if key:
            domains: dict[str | None, list[str]] = {
                name: [n for n in nodes if n not in avoid]
                for name, nodes in self.snap.domains(anchor, key).items()}
        else:
            domains = {None: [n for n in self.snap.eligible_nodes(anchor) if n not in avoid]}
        best: Choice | None = None
        ranked = sorted((estimate, str(domain), domain) for domain, nodes in domains.items()
                        if (estimate := self._estimate(nodes, need, queue, anchor.priority,
                                                       anchor.may_preempt)) is not None)
        for _, _, domain in ranked[:EXACT_DOMAINS]:
            nodes = domains[domain]
            found = self._in_domain(members, nodes, queue, need)
            if found is None or not found[0]:
                continue
            victims, plan = found
            if best is None or _set_cost(victims) < _set_cost(best.victims):
                best = Choice(domain, key, tuple(victims), Plan(domain, plan.assignments))
        return best

    def commit(self, choice: Choice, members: Sequence[PodInfo], queue: str) -> None:
        """The victims are gone and their room is the preemptor's, in this snapshot."""
        chosen = {id(v.pods) for v in choice.victims}
        for i, unit in enumerate(self.units):
            if id(unit.pods) in chosen:
                self.taken.add(i)
        for victim in choice.victims:
            self._release(victim)
            self.ledger.add(victim.queue, -victim.gpus)
            for b in self.budgets:
                self.allowance[b.name] -= sum(1 for p in victim.pods if p.key in b.pods)
        reserve(choice.plan, members, self.snap)
        self.ledger.add(queue, self.snap.need(members))
