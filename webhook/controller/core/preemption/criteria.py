"""The victim order: which running work is cheapest to evict, defined once.

A unit (a whole gang, or a pod in none: `Victim`) may go only when
- every pod of it holding GPUs has run its minimum runtime (`old_enough`), and
- the preemptor outranks it (`outranks`), or reclaims from its queue (`candidates`).
Among those that may go, cheapest first (`cost`): the lowest priority, then the least
work lost (GPUs times the time since each pod started, or since the checkpoint it states:
`work_lost`; a pod above an elastic gang's minimum loses its whole gang's), then the
youngest. A set of victims costs (`set_cost`) its highest priority, then its total work
lost (an elastic gang's once), then its oldest start, then its size.

A unit backfilled onto the room reserved for the head of the queue that runs past the end it
was admitted on (`overran`) comes before all of them, whatever its priority: it holds
that room on a promise it broke. No minimum runtime protects it either: it has run all
it said it would. The head may evict it whatever its priority and queue (`planning`).

Everything the search does derives from these: which units are built as candidates
(`candidates`), the order a domain's units are walked in, and the cheapest set kept
between domains (`planning`), the lower bound that lets whole domains be skipped
(`costs.Costs.bound`: the least priority and work lost any set freeing enough could cost,
from `saved_from` and `work_lost`), and the glances that rule out a gang with no hope
(`planning`'s room below a priority, `occupancy.room_below`: units below its priority,
old enough). A new criterion is taught here, and to the bound if it changes what a set
must cost at least.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Victim, lost_of
from webhook.controller.core.pods import PodInfo

T = TypeVar("T")

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
    # A victim is told first and evicted once it answers (a checkpoint since) or this
    # long after (`notices`); 0 evicts at once.
    checkpoint_grace: float = 0.0
    # A gang that prefers a domain gets one made free when that loses at most this many
    # times the work of the cheapest victims anywhere (`planning`).
    preferred_premium: float = 1.5
    # Targeted defragmentation (`moving`): off, or pods moved per hour at most, the most
    # GPUs moved per GPU the gang gets, and the PriorityClasses of the classes never moved
    # (a pod's class label is the pod's to change once it runs; its PriorityClass is not).
    moves_per_hour: int = 0
    max_moved_share: float = 0.5
    protected_priority_classes: frozenset[str] = frozenset()
    # Whether Airlock evicts for the pods of a PriorityClass, where its class's policy
    # says so (`preempts`): kube-scheduler may be told `Never` while Airlock evicts.
    preempts_by_priority_class: tuple[tuple[str, bool], ...] = ()
    # A class's own `delay` where its policy sets one (`preemptionDelay`), by its pods'
    # PriorityClass: serving gangs evict at once, as kube-scheduler does for their pods.
    delay_by_priority_class: tuple[tuple[str, float], ...] = ()

    def may_preempt(self, pod: PodInfo) -> bool:
        """Whether Airlock evicts lower-priority work for `pod`: as its class's policy
        says, else as its PriorityClass's `preemptionPolicy`."""
        return _of_class(self.preempts_by_priority_class, pod, pod.may_preempt)

    def delay_for(self, pod: PodInfo) -> float:
        """How long `pod`'s unit waits whole for room before it may preempt."""
        return _of_class(self.delay_by_priority_class, pod, self.delay)


def _of_class(stated: tuple[tuple[str, T], ...], pod: PodInfo, default: T) -> T:
    """What `pod`'s class states, by its PriorityClass (fixed at creation and given by
    policy, unlike its labels), else `default`."""
    return next((value for name, value in stated if name == pod.priority_class), default)


def old_enough(started: float, young: float) -> bool:
    """Whether a pod that started at `started` (0: not yet) has run its minimum runtime,
    where `young` is the latest start that has (now less the minimum runtime)."""
    return 0 < started <= young


def saved_from(pod: PodInfo) -> float:
    """When the pod's work is saved from: its last stated checkpoint, else its start."""
    return max(pod.started, pod.checkpointed or 0.0)


def work_lost(gpus: GpuEquivalents, saved: float, now: float) -> float:
    """GPU-seconds lost evicting `gpus` GPUs whose work is saved from `saved`."""
    return gpus * max(now - saved, 0.0)


def overran(pods: Sequence[PodInfo], now: float) -> float | None:
    """When the unit of `pods` was backfilled to end, if it is past it now: its first
    record (its admission; joiners' later records promise nothing) says."""
    records = [p.recorded.placement for p in pods if p.recorded.placement is not None]
    if not records:
        return None
    until = min(records, key=lambda r: r.at).backfilled_until
    return until if until is not None and now > until else None


# Where an overran backfill ranks in the victim order: below any priority.
OVERRAN = -(2 ** 31) - 1


def _rank(unit: Victim) -> int:
    return OVERRAN if unit.overran is not None else unit.priority


def outranks(victim: Victim, priority: int, may_preempt: bool) -> bool:
    """Whether a preemptor of `priority`, whose class may preempt or not, outranks the
    victim: its cause is then priority; any other victim the rules let go is reclaimed."""
    return may_preempt and victim.priority < priority


def cost(unit: Victim) -> tuple[int, float, bool, float]:
    """Cheapest first: overran backfills, then lowest priority, least work lost, a pod
    whose elastic gang runs on before a unit that stops (the same work lost), youngest."""
    return _rank(unit), unit.lost, unit.restarts is None, -unit.started


def set_cost(victims: Sequence[Victim]) -> tuple[int, float, float, int]:
    """What evicting all of `victims` costs, to compare sets: the highest priority among
    them, the work they lose, the oldest start, and how many they are."""
    return (max(_rank(v) for v in victims), lost_of(victims),
            -min(v.started for v in victims), len(victims))


def whole_domain_worth(whole: Sequence[Victim], spread: Sequence[Victim],
                       premium: float) -> bool:
    """Whether freeing one domain for a gang that prefers one is worth it over the
    cheapest set anywhere: never at a higher priority, and for at most `premium` times
    the work that set would lose."""
    return set_cost(whole)[0] <= set_cost(spread)[0] and \
        lost_of(whole) <= premium * lost_of(spread)
