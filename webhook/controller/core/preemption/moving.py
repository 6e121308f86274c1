"""Targeted defragmentation: the first in a queue would fit in the free GPUs the cluster
has, but no domain of the level it requires holds it. Moving a few pods out of one domain
frees one, where evicting by priority finds nothing or costs more.

A pod may be moved when its replacement comes back through Airlock's gate, so that
Airlock places it off the nodes of that domain the gang is planned on (they are held
for the gang, as for a preemption): a single pod Airlock queued whose owner makes it
again (a Deployment's or StatefulSet's replica, a Job's pod), or an elastic gang's pod
above its minimum, whose replacement joins its gang. Never a pod of a protected class,
nor one younger than the minimum runtime, out of scope, or past its PodDisruptionBudget
(the same candidates as preemption's). Per domain, whole nodes closest to free come first,
pods are taken until the gang fits, and those it does not need are given back; the
domain that moves the fewest GPUs wins, if it moves at most `max_moved_share` of what
the gang gets and no more pods than the hour's budget has left.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.identities import PodKey
from webhook.controller.core.placement.packing import Plan, place_in
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Budget
from webhook.controller.core.preemption.candidates import Candidates
from webhook.controller.core.preemption.planning import release

# Owners that make a pod again once it is evicted.
REMADE_BY = frozenset({"ReplicaSet", "StatefulSet", "Job"})
# Domains tried, those with the most free GPUs first: the rest would move more.
DOMAINS = 8


@dataclass(frozen=True, slots=True)
class Moves:
    domain: str
    victims: tuple[Victim, ...]
    plan: Plan

    @property
    def gpus(self) -> GpuEquivalents:
        return sum(v.gpus for v in self.victims)


def movable(victim: Victim, protected: Collection[str]) -> bool:
    """Whether the unit is one pod whose replacement Airlock places again, of no
    `protected` PriorityClass."""
    if victim.unit.kind != "pod" or len(victim.pods) != 1:
        return False
    (pod,) = victim.pods
    if pod.priority_class in protected:
        return False
    if pod.gang_id is not None:  # a pod of its own: above its elastic gang's minimum
        return True
    return pod.marks.single and any(
        o.get("kind") in REMADE_BY and o.get("controller") for o in pod.owners)


def plan_moves(snap: Snapshot, members: Sequence[PodInfo],
               domains: Mapping[str, Sequence[str]], units: Candidates,
               budgets: Sequence[Budget], protected: Collection[str], most: float,
               left: int) -> Moves | None:
    """The fewest GPUs to move out of one domain so that the gang fits there, or None."""
    best: Moves | None = None
    tried = sorted(domains.items(), key=lambda d: (-snap.free_gpus(d[1]), d[0]))[:DOMAINS]
    for name, nodes in tried:
        found = _in_domain(snap, members, name, nodes, units, budgets, protected, most, left)
        if found is not None and (best is None or (found.gpus, len(found.victims)) <
                                  (best.gpus, len(best.victims))):
            best = found
    return best


def _in_domain(snap: Snapshot, members: Sequence[PodInfo], name: str, nodes: Sequence[str],
               units: Candidates, budgets: Sequence[Budget], protected: Collection[str],
               most: float, left: int) -> Moves | None:
    fork = snap.fork()
    cluster = units.cluster
    on_node: dict[str, list[Victim]] = {}
    kept: dict[str, GpuEquivalents] = {}
    for node in nodes:
        for key in sorted(cluster.occupancy.on_node.get(node, ())):
            gpus = cluster.occupancy.gpus_of.get(key, 0)
            victim = units.get(units.unit_of(cluster.pods[key]))
            if victim is not None and movable(victim, protected):
                on_node.setdefault(node, []).append(victim)
            else:
                kept[node] = kept.get(node, 0) + gpus
    # Nodes that free whole first (nothing unmovable on them), the fewest GPUs to move
    # first among those; within a node, the smallest pods, then the youngest.
    order = sorted(on_node, key=lambda n: (kept.get(n, 0), sum(v.gpus for v in on_node[n]), n))
    allowance = {b.name: b.allowed for b in budgets}
    gpus_of = cluster.occupancy.gpus_of
    chosen: list[Victim] = []
    moved: GpuEquivalents = 0
    for node in order:
        for victim in sorted(on_node[node], key=lambda v: (v.gpus, -v.started)):
            spent = {b.name: sum(1 for p in victim.pods if p.key in b.pods) for b in budgets}
            if len(chosen) >= left or moved + victim.gpus > most or \
                    any(allowance[k] < n for k, n in spent.items() if n):
                continue
            for k, n in spent.items():
                allowance[k] -= n
            release(fork, victim, gpus_of)
            chosen.append(victim)
            moved += victim.gpus
            if (plan := place_in(members, fork, nodes)) is not None:
                return _trimmed(fork, members, name, nodes, chosen, plan, gpus_of)
    return None


def _trimmed(fork: Snapshot, members: Sequence[PodInfo], name: str, nodes: Sequence[str],
             chosen: list[Victim], plan: Plan, gpus_of: Collection[PodKey]) -> Moves:
    """Every pod the gang does not need given back, the largest first."""
    for victim in sorted(chosen, key=lambda v: -v.gpus):
        release(fork, victim, gpus_of, sign=1)
        if (smaller := place_in(members, fork, nodes)) is not None:
            plan = smaller
            chosen = [v for v in chosen if v is not victim]
        else:
            release(fork, victim, gpus_of)
    return Moves(name, tuple(chosen), Plan(name, plan.assignments))
