"""The policy's queues, fair share and preemption settings, as the pure core takes them:
quotas in GPU-equivalents, durations in seconds."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.growth.asking import CapacitySettings
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.fairshare import FairShare
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.policy.model import Policy
from webhook.policy.queues import Queue, seconds


def _total(counts: Mapping[str, int] | None, accelerators: Accelerators
           ) -> GpuEquivalents | None:
    return None if counts is None else accelerators.count(dict(counts))


def quotas_of(policy: Policy, accelerators: Accelerators) -> Quotas:
    return Quotas(QueueSpec(q.name, q.namespaces, *_queue_totals(q, accelerators), q.weight)
                  for q in policy.queues)


def _queue_totals(q: Queue, accelerators: Accelerators
                  ) -> tuple[GpuEquivalents, GpuEquivalents | None, GpuEquivalents | None]:
    """A queue's nominal, borrowing and lending limits over every model: as stated, or,
    where it states quotas per model only, their sums (a limit absent on any model is
    no limit), so a queue is never a borrower of what its models guarantee it."""
    nominal = _total(q.nominal, accelerators)
    borrowing = _total(q.borrowing_limit, accelerators)
    lending = _total(q.lending_limit, accelerators)
    if q.models and not q.nominal:
        nominal = sum(m.nominal for m in q.models)
        if q.borrowing_limit is None:
            borrowing = _sum(m.borrowing_limit for m in q.models)
        if q.lending_limit is None:
            lending = _sum(m.lending_limit for m in q.models)
    return nominal or 0, borrowing, lending


def _sum(limits: Iterable[int | None]) -> int | None:
    found = list(limits)
    return None if None in found else sum(v for v in found if v is not None)


def preemption_of(policy: Policy) -> PreemptionSettings:
    spec = policy.preemption
    moves = spec.defragmentation
    return PreemptionSettings(spec.enabled, seconds(spec.min_runtime), seconds(spec.delay),
                              seconds(spec.requeue_backoff),
                              seconds(spec.stale_gang_grace_period),
                              seconds(spec.checkpoint_grace), spec.preferred_domain_premium,
                              moves.moves_per_hour if moves.enabled else 0,
                              moves.max_moved_share,
                              frozenset(policy.classes[c].priority_class.name
                                        for c in moves.protected_classes),
                              tuple((c.priority_class.name, c.preempts)
                                    for c in policy.classes.values()
                                    if c.preempts is not None),
                              tuple((c.priority_class.name, seconds(c.preemption_delay))
                                    for c in policy.classes.values()
                                    if c.preemption_delay is not None))


def fair_share_of(policy: Policy, current: FairShare | None, now: float) -> FairShare:
    """The fair share under this policy, keeping the usage remembered so far."""
    half_life = seconds(policy.fair_share.half_life)
    entry = seconds(policy.fair_share.entry_charge)
    if current is None:
        return FairShare(half_life, entry, now)
    if (current.half_life, current.entry_seconds) == (half_life, entry):
        return current
    return FairShare(half_life, entry, current.at, current.usage)


def capacity_of(policy: Policy) -> CapacitySettings:
    return CapacitySettings(seconds(policy.capacity.timeout), seconds(policy.capacity.backoff))
