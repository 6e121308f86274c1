"""The units that could be victims this round, whoever the preemptor: a whole gang (every
active member, wherever it runs), or a single pod outside any gang; never part of a gang,
but for an elastic gang's pods above its minimum: each of those is also a unit of its
own, so they go first, one by one, and its minimum goes only with the whole gang. Such a
pod frees only its own GPUs, but loses the whole gang's work since its checkpoint
(`restarted`). Built when a plan first looks at their nodes: a round that plans in a few
domains of a busy cluster never builds the rest.

Never a unit in a `spared` namespace (out of Airlock's scope), with a pod holding GPUs
that is not old enough (`criteria.old_enough`; a backfill that overran is, whatever its
age: `criteria.overran`), with a member being deleted (the gang is
going anyway) or `deleted` by this controller, holding no GPUs, or whose
PodDisruptionBudgets cannot lose that many pods."""

from __future__ import annotations

import functools
from collections.abc import Collection, Mapping, Sequence

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Budget
from webhook.controller.core.preemption.criteria import (
    PreemptionSettings,
    old_enough,
    overran,
    saved_from,
    work_lost,
)
from webhook.controller.core.queues.quotas import Quotas


def unit_of(pods: Sequence[PodInfo], unit: UnitId, queue: str, now: float,
            gpus_of: Mapping[PodKey, GpuEquivalents],
            restarted: Sequence[PodInfo] | None = None) -> Victim:
    """`pods` weighed as one unit, by the GPUs they hold and the work of `restarted` (by
    default `pods` themselves) since their last checkpoint."""
    gpus: GpuEquivalents = 0
    lost = 0.0
    for p in pods:  # one pass: a round weighs tens of thousands of units
        if (g := gpus_of.get(p.key, 0)):
            gpus += g
            if restarted is None:
                lost += work_lost(g, saved_from(p), now)
    if restarted is not None:
        lost = sum(work_lost(g, saved_from(p), now) for p in restarted
                   if (g := gpus_of.get(p.key, 0)))
    return Victim(tuple(pods), unit, queue, max(p.priority for p in pods), gpus, lost,
                  max(p.started for p in pods), overran=overran(pods, now))


def restarted(cluster: Tracked, unit: UnitId, pods: Sequence[PodInfo]
              ) -> Sequence[PodInfo] | None:
    """Whose work since their last checkpoint evicting `unit` loses, where it is not the
    unit's own pods: for a pod above an elastic gang's minimum, every member's. The gang
    runs on, but an elastic job restarts all its workers from its last checkpoint when
    one leaves (torchrun does; so do the bench's operator and `airlock simulate`)."""
    gang = pods[0].gang_id if unit.kind == "pod" else None
    members = cluster.membership.members.get(UnitId.of_gang(gang)) if gang else None
    return list(members.values()) if members else None


def above_minimum(cluster: Tracked, gang: UnitId) -> frozenset[PodKey]:
    """An elastic gang's pods above the minimum its first record states: of the members
    holding GPUs, those created after the first `minimum` (so the last to come go first).
    Empty for a gang that runs whole."""
    members = cluster.membership.members.get(gang)
    records = [r for p in (members or {}).values() if (r := p.recorded.placement) is not None]
    minimum = min(records, key=lambda r: r.at).minimum if records else None
    if members is None or minimum is None:
        return frozenset()
    gpus_of = cluster.occupancy.gpus_of
    running = sorted((p for p in members.values() if p.key in gpus_of),
                     key=lambda p: (p.created, p.name))
    return frozenset(p.key for p in running[minimum:])


def unit_id(pod: PodInfo, above: Collection[PodKey] = frozenset()) -> UnitId:
    """The unit a bound pod goes with: its gang, or itself (a pod of no gang, or one
    `above` its elastic gang's minimum)."""
    gang = pod.gang_id
    return UnitId.of_gang(gang) if gang is not None and pod.key not in above else \
        UnitId.of_pod(pod.key)


def within(unit: Victim, budget: Budget, allowance: Mapping[str, int]) -> bool:
    hit = sum(1 for p in unit.pods if p.key in budget.pods)
    return not hit or hit <= allowance[budget.name]


class Candidates:
    def __init__(self, cluster: Tracked, quotas: Quotas, now: float,
                 settings: PreemptionSettings, budgets: Sequence[Budget] = (),
                 spared: Collection[str] = (), deleted: Collection[str] = ()) -> None:
        self.cluster = cluster
        self.settings = settings
        self.queue_of = quotas.queue_of
        self.now = now
        self.young = now - settings.min_runtime
        self.budgets = budgets
        self.allowance = {b.name: b.allowed for b in budgets}
        self.spared = frozenset(spared)
        self.deleted = deleted
        self._built: dict[UnitId, Victim | None] = {}
        self._above_minimum: dict[UnitId, frozenset[PodKey]] = {}

    @functools.cached_property
    def overran_nodes(self) -> frozenset[str]:
        """The nodes where backfills that ran past their expected end run."""
        cluster, now = self.cluster, self.now
        nodes: set[str] = set()
        for key, until in cluster.backfilled.items():
            if now > until:
                pod = cluster.pods[key]
                gang = pod.gang_id
                pods = cluster.membership.members.get(UnitId.of_gang(gang), {}).values() \
                    if gang is not None else (pod,)
                nodes.update(p.node_name for p in pods if p.node_name)
        return frozenset(nodes)

    def _above(self, gang: UnitId) -> frozenset[PodKey]:
        found = self._above_minimum.get(gang)
        if found is None:
            found = self._above_minimum[gang] = above_minimum(self.cluster, gang)
        return found

    def unit_of(self, pod: PodInfo) -> UnitId:
        """The unit a bound pod goes with (`unit_id`)."""
        gang = pod.gang_id
        return unit_id(pod, self._above(UnitId.of_gang(gang)) if gang is not None else ())

    def get(self, unit: UnitId) -> Victim | None:
        try:
            return self._built[unit]
        except KeyError:
            found = self._built[unit] = self._build(unit)
            return found

    def _build(self, unit: UnitId) -> Victim | None:
        if unit.namespace in self.spared:
            return None
        cluster, young = self.cluster, self.young
        gpus_of = cluster.occupancy.gpus_of
        if unit.kind == "pod":
            pods = [cluster.pods[PodKey(unit.namespace, unit.name)]]
        else:
            members = cluster.membership.members.get(unit)
            if cluster.membership.deleting[unit] or not members:
                return None
            pods = list(members.values())
        late = overran(pods, self.now) is not None
        if any(p.uid in self.deleted or (
                not late and p.key in gpus_of and not old_enough(p.started, young))
                for p in pods):
            return None
        found = unit_of(pods, unit, self.queue_of(unit.namespace), self.now, gpus_of,
                        restarted(cluster, unit, pods))
        if not found.gpus:
            return None
        allowance = self.allowance
        return found if all(within(found, b, allowance) for b in self.budgets) else None
