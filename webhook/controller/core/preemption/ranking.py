"""Which domains a preemptor plans in: its candidate domains ranked by what freeing room
there would cost, cheapest first, by the victim order (`criteria`), from a walk of each
domain's units (`Rankings.estimate`) in the order of a lower bound kept between rounds
(`costs.Costs.bound`), and no more walks once no bound can beat the best found. What a
round takes is taken out: a unit taken is in no later ranking, and a domain where one ran
is costed afresh."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.preemption.candidates import Candidates, unit_id
from webhook.controller.core.preemption.costs import Costs
from webhook.controller.core.preemption.criteria import OVERRAN, cost, old_enough, outranks

# Domains whose victims are chosen exactly (packing, quotas, budgets), after a quick
# estimate ranks them: the exact choice is the expensive part.
EXACT_DOMAINS = 3


class Usable(NamedTuple):
    """A domain's nodes a preemptor may use, and what names them for the rankings: the
    domain, and the nodes kept from it, if any. A NamedTuple: a plan makes one for each
    of hundreds of domains."""

    nodes: list[str]
    key: tuple[object, ...]


# A domain as ranked for planning: the estimate of its cost, its name, the domain.
Ranked = tuple[tuple[int, float], str, str | None]
# What taking no victim costs (below any priority, no work lost): a domain with room
# enough already ranks before any other.
NOTHING: tuple[int, float] = (-(2 ** 31), 0.0)


@dataclass(frozen=True, slots=True)
class Ranking:
    """Units on some nodes, cheapest first, and the GPUs each frees there."""

    order: list[UnitId]
    each: list[GpuEquivalents]


class Rankings:
    """The domain rankings of one round, as its preemptions take units."""

    def __init__(self, snap: Snapshot, units: Candidates) -> None:
        self.snap = snap
        self.units = units
        self.taken: set[UnitId] = set()
        self._rankings: dict[tuple[object, ...], Ranking] = {}
        # Unit -> the rankings it is in, to drop them once the unit is taken.
        self._ranked_in: dict[UnitId, list[tuple[object, ...]]] = {}
        # Pods of units taken, the nodes they ran on, and the costs of evicting on sets
        # of nodes among those, without them.
        self.gone: set[PodKey] = set()
        self._gone_on: set[str] = set()
        self._costs_here: dict[tuple[object, ...], Costs] = {}

    def take(self, victim: Victim) -> None:
        """The victim is gone: in no ranking from now on, nor in the costs of its nodes;
        nor the units that share its pods (an elastic gang and its pods above the
        minimum, each a unit too)."""
        units = {victim.unit, *(self.units.unit_of(p) for p in victim.pods),
                 *(unit_id(p) for p in victim.pods)}
        self.taken.update(units)
        # Rankings that hold them are made again without them.
        for unit in units:
            for key in self._ranked_in.pop(unit, ()):
                self._rankings.pop(key, None)
        for pod in victim.pods:
            self.gone.add(pod.key)
            self._gone_on.add(pod.node_name or "")
        self._costs_here.clear()

    @staticmethod
    def usable(domains: Iterable[tuple[str | None, list[str]]], level: tuple[object, ...],
               avoid: Collection[str], eligible: Collection[str],
               domain_of: Callable[[str], str | None]) -> dict[str | None, Usable]:
        """Each of `domains` (its name, its nodes) as a preemptor may use it: its nodes
        but those to `avoid` (a few at most; an `eligible` one is in the domain
        `domain_of` says), named for the rankings by `level` (the pods' signature and
        topology key), the domain, and the nodes kept from it, if any. The nodes to avoid
        are sorted into their domains once, not looked for in each of hundreds."""
        cuts: dict[str | None, set[str]] = {}
        for n in avoid:
            if n in eligible:
                cuts.setdefault(domain_of(n), set()).add(n)
        found = {}
        for domain, nodes in domains:
            cut = cuts.get(domain)
            found[domain] = Usable(nodes, (*level, domain)) if cut is None else \
                Usable([n for n in nodes if n not in cut], (*level, domain, frozenset(cut)))
        return found

    def ranking(self, usable: Usable) -> Ranking:
        """The units on the nodes, cheapest first, with what each frees there (a gang may
        span domains); the same domains come back for every gang of a round."""
        key, nodes = usable.key, usable.nodes
        found = self._rankings.get(key)
        if found is None:
            here: dict[UnitId, tuple[Victim, GpuEquivalents]] = {}
            taken, units = self.taken, self.units
            pods, holding = units.cluster.pods, units.cluster.occupancy.holders
            for n in nodes:
                # The pods holding GPUs there: most of a node's pods hold none.
                for _, _, gpus, pod_key, _ in holding.get(n, ()):
                    name = units.unit_of(pods[pod_key])
                    if name in taken or (unit := units.get(name)) is None:
                        continue
                    _, before = here.get(name, (unit, 0))
                    here[name] = unit, before + gpus
            ranked = sorted(((u, k, f) for k, (u, f) in here.items()),
                            # Ties go by name, whatever order the pods were seen in.
                            key=lambda item: (cost(item[0]), item[1]))
            found = self._rankings[key] = Ranking([k for _, k, _ in ranked],
                                                   [f for _, _, f in ranked])
            for unit_name in found.order:
                self._ranked_in.setdefault(unit_name, []).append(key)
        return found

    def below(self, nodes: Sequence[str], priority: int, shape: tuple[int, GpuEquivalents]
               ) -> bool:
        """Whether `shape` (pods, GPUs of the smallest) could go on `nodes` were every pod
        below `priority` that has run its minimum runtime gone: a necessary condition
        (units, budgets and quotas not yet weighed), node by node."""
        count, smallest = shape
        if smallest <= 0:
            return True
        young, holding, free_gpu = self.units.young, \
            self.units.cluster.occupancy.holders, self.snap.free_gpu
        fit = 0
        for n in nodes:
            room = max(free_gpu[n], 0)
            for h in holding.get(n, ()):
                if h.priority >= priority:
                    break
                if old_enough(h.started, young):
                    room += h.gpus
            fit += room // smallest
            if fit >= count:
                return True
        return False

    def untouched(self, usable: Usable) -> bool:
        """Whether no victim taken this round ran on the usable nodes."""
        return not self._gone_on or self._gone_on.isdisjoint(usable.nodes)

    def costs(self, usable: Usable) -> Costs:
        """What evicting pods on the usable nodes would cost: the tracked cluster's, kept
        between rounds, unless a victim taken this round ran there."""
        units = self.units
        if self.untouched(usable):
            return units.cluster.occupancy.costs(usable.key, usable.nodes, units.spared)
        found = self._costs_here.get(usable.key)
        if found is None:
            holding, spared, gone = units.cluster.occupancy.holders, units.spared, self.gone
            found = self._costs_here[usable.key] = Costs(
                h for n in usable.nodes for h in holding.get(n, ())
                if h.pod.namespace not in spared and h.pod not in gone)
        return found

    def estimate(self, usable: Usable, need: GpuEquivalents, queue: str, priority: int,
                  may_preempt: bool, reclaiming: bool, head: bool = False
                  ) -> tuple[int, float] | None:
        """A quick estimate of what freeing `need` GPUs on the nodes costs: the units
        that may go, cheapest first, until they free enough there (no packing, no queue
        arithmetic, no budgets). A whole gang counts, with its work lost wherever its
        members run: counting its pods here alone ranked a domain held by a young gang
        before one of single pods that would cost less. None when even all of them are
        not enough. The `head` of the queue may take backfills that overran."""
        deficit = need - self.snap.free_gpus(usable.nodes)
        if deficit <= 0:
            return NOTHING
        top, lost = NOTHING
        ranking = self.ranking(usable)
        for name, freed in zip(ranking.order, ranking.each, strict=True):
            unit = self.units.get(name)
            assert unit is not None  # ranked units are built
            late = head and may_preempt and unit.overran is not None
            if not (late or outranks(unit, priority, may_preempt)
                    or (reclaiming and unit.queue != queue)):
                continue
            top, lost = max(top, OVERRAN if late else unit.priority), lost + unit.lost
            deficit -= freed
            if deficit <= 0:
                return top, lost
        return None

    def ranked(self, domains: Mapping[str | None, Usable], need: GpuEquivalents,
                below: int | None, estimate: Callable[[Usable], tuple[int, float] | None],
                overran: frozenset[str] = frozenset()) -> list[Ranked]:
        """The domains the estimate ranks best, in its order: all of them when there are
        no more than are planned exactly, else at least the EXACT_DOMAINS best. The
        estimate walks a domain's units, a pass over its pods; so domains are walked in
        the order of a bound no greater than the estimate (`Costs.bound`, kept between
        rounds), and no more once a bound cannot beat the last of the best: the same
        ranking, from a few walks. A bound at or above priority `below`, if given, rules
        a domain out: pods below it cannot free enough there. A domain with a node in
        `overran` (a backfill that overran runs there) is walked whatever its bound: the
        bound counts by priority, and such a unit goes first whatever its priority."""
        if len(domains) <= EXACT_DOMAINS:
            return sorted((cost, str(domain), domain) for domain, usable in domains.items()
                          if (cost := estimate(usable)) is not None)
        best: list[Ranked] = []
        for bound, name, domain in self._bounds(domains, need, below, overran):
            if len(best) >= EXACT_DOMAINS and (bound, name) > best[EXACT_DOMAINS - 1][:2]:
                break
            cost = estimate(domains[domain])
            if cost is not None:
                bisect.insort(best, (cost, name, domain))
        return best

    def _bounds(self, domains: Mapping[str | None, Usable], need: GpuEquivalents,
                below: int | None, overran: frozenset[str]) -> list[Ranked]:
        """Each domain's bound (`ranked`), lowest first."""
        now, free_gpus, units = self.units.now, self.snap.free_gpus, self.units
        # Hundreds of domains a plan: while this round took no victim, the costs kept
        # between rounds are asked for in line.
        kept = units.cluster.occupancy.costs if not self._gone_on else None
        bounds: list[Ranked] = []
        for domain, usable in domains.items():
            deficit = need - free_gpus(usable.nodes)
            if deficit <= 0 or (overran and not overran.isdisjoint(usable.nodes)):
                bound: tuple[int, float] | None = NOTHING
            else:
                costs = self.costs(usable) if kept is None else \
                    kept(usable.key, usable.nodes, units.spared)
                bound = costs.bound(deficit, now)
            if bound is not None and (below is None or bound[0] < below):
                bounds.append((bound, str(domain), domain))
        bounds.sort()
        return bounds
