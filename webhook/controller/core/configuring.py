"""The policy's queues, fair share and preemption settings, as the pure core takes them:
quotas in GPU-equivalents, durations in seconds."""

from __future__ import annotations

from collections.abc import Mapping

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.growth.asking import CapacitySettings
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.fairshare import FairShare
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.policy.model import Policy
from webhook.policy.queues import seconds


def _total(counts: Mapping[str, int] | None, accelerators: Accelerators
           ) -> GpuEquivalents | None:
    return None if counts is None else accelerators.count(dict(counts))


def quotas_of(policy: Policy, accelerators: Accelerators) -> Quotas:
    return Quotas(QueueSpec(q.name, q.namespaces, _total(q.nominal, accelerators) or 0,
                            _total(q.borrowing_limit, accelerators),
                            _total(q.lending_limit, accelerators), q.weight)
                  for q in policy.queues)


def preemption_of(policy: Policy) -> PreemptionSettings:
    spec = policy.preemption
    return PreemptionSettings(spec.enabled, seconds(spec.min_runtime), seconds(spec.delay),
                              seconds(spec.requeue_backoff),
                              seconds(spec.stale_gang_grace_period))


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
