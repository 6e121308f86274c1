"""Team queues, fair share and preemption in policy: `spec.queues`, `spec.fairShare` and
`spec.preemption`. The controller enforces them; see docs/controller.md ("Queues, fair
share and preemption").

Counts are whole devices of the policy's accelerators (`scope.accelerators`); the
controller adds them up as GPU-equivalents. Durations are Go-style: `90s`, `5m`, `1h30m`,
`24h`, or `0`.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Annotated, Literal

from pydantic import Field, field_validator

from webhook.keys import ClassName
from webhook.policy.fields import Strict as _Strict
from webhook.policy.sources import Loc

_DURATION = re.compile(r"^(0|([0-9]+(\.[0-9]+)?(ms|s|m|h))+)$")
_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)")
_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_QUEUE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

Duration = Annotated[str, Field(pattern=_DURATION.pattern,
                                json_schema_extra={"examples": ["30s", "5m", "24h"]})]
# A whole, non-negative count: `1.5`, `-1` and `"8"` are errors, not roundings.
Count = Annotated[int, Field(strict=True, ge=0)]
Fungibility = Literal["NextModelFirst", "BorrowFirst"]


class ModelQuota(_Strict):
    """A queue's quota of one model, in its order of preference."""

    model: str = Field(description="One of `spec.gpuModels`.")
    nominal: Count = Field(0, description="Devices of the model guaranteed to the queue.")
    borrowing_limit: Count | None = Field(
        None, alias="borrowingLimit", description="How many devices of the model beyond "
        "its nominal the queue may borrow. Absent: no limit.")
    lending_limit: Count | None = Field(
        None, alias="lendingLimit", description="How many of its nominal devices of the "
        "model other queues may borrow while it is idle. Absent: all of them.")


def queue_named(namespace: str, queues: Iterable[tuple[str, Sequence[str]]]) -> str | None:
    """The first of `queues` (name, namespace globs) that takes `namespace`: where globs
    overlap, the first queue wins."""
    return next((name for name, globs in queues
                 if any(fnmatch.fnmatchcase(namespace, g) for g in globs)), None)


def seconds(duration: str) -> float:
    """A duration the model accepted, in seconds."""
    return sum(float(n) * _UNIT[unit] for n, unit in _PART.findall(duration))


class Queue(_Strict):
    """A team's queue: the namespaces whose pods it holds, and their GPU quota."""

    name: str = Field(description="Unique across the policy files. A queue named "
                      "`default` takes the namespaces no other queue names.")
    namespaces: tuple[str, ...] = Field(
        (), description="Namespace names, or shell-style globs (`team-a-*`). A namespace "
        "may be named by one queue only; where globs overlap, the first queue wins. A "
        "namespace in no queue is in `default`, with no guarantee.")
    nominal: dict[str, Count] = Field(
        default_factory=dict, description="Accelerator -> devices guaranteed to the queue "
        "(`{nvidia.com/gpu: 64}`). Its gangs are admitted within it whenever they fit, "
        "and it reclaims it from queues that borrowed it.")
    borrowing_limit: dict[str, Count] | None = Field(
        None, alias="borrowingLimit", description="How many devices beyond its nominal the "
        "queue may use while other queues' nominal is idle. Absent: no limit.")
    lending_limit: dict[str, Count] | None = Field(
        None, alias="lendingLimit", description="How many devices of its nominal other "
        "queues may borrow while it is idle. Absent: all of it. The rest is kept for "
        "this queue even when it is idle.")
    models: tuple[ModelQuota, ...] = Field(
        (), description="Quotas per GPU model (`spec.gpuModels`), in the order the queue "
        "tries them for a pod that names no model. Absent: the queue's quota is for any "
        "model. Present: its pods run only on the models listed.")
    fungibility: Fungibility = Field(
        "NextModelFirst", description="When a gang's first model has no quota left but "
        "could be borrowed: `NextModelFirst` tries the next model within its quota first, "
        "`BorrowFirst` borrows the first model. Borrowed GPUs are reclaimed by preemption, "
        "so the default keeps to quota.")
    weight: float = Field(1.0, gt=0, description="Fair share weight: the queue's decayed "
                          "usage is divided by it, so weight 2 gets twice the GPU time.")

    @field_validator("name")
    @classmethod
    def _queue_name(cls, v: str) -> str:
        if not _QUEUE_NAME.match(v) or len(v) > 63:
            raise ValueError(f"{v!r}: queue names are lowercase letters, digits and '-'")
        return v


class FairShareSpec(_Strict):
    half_life: Duration = Field(
        "24h", alias="halfLife", description="How fast past usage is forgotten: GPU-seconds "
        "used one half-life ago count half. `0` counts only the GPUs held now.")
    entry_charge: Duration = Field(
        "10m", alias="entryCharge", description="Charged at admission, as if the gang's "
        "GPUs had run this long, so a burst of submissions cannot all go in at the same "
        "low share.")


class DefragmentationSpec(_Strict):
    enabled: bool = Field(False, description="Whether the first in a queue, which would "
                          "fit in the cluster's free GPUs but fits no domain of the level "
                          "it requires, may have pods moved out of one domain to free it: "
                          "a queued pod whose owner makes it again (a Deployment's or "
                          "StatefulSet's replica, a Job's scavenger) or an elastic gang's "
                          "pod above its minimum, through pods/eviction, where its "
                          "PodDisruptionBudget allows. Airlock places the new pod elsewhere.")
    moves_per_hour: Count = Field(10, alias="movesPerHour", description="Pods moved per "
                                  "hour at most, cluster-wide.")
    max_moved_share: float = Field(
        0.5, gt=0, le=1, alias="maxMovedShare", description="No move for less gain: the GPUs "
        "moved are at most this share of the GPUs the gang gets.")
    protected_classes: list[ClassName] = Field(
        [], alias="protectedClasses", description="Classes whose pods are never moved (told "
        "by the pod's PriorityClass, which the pod cannot change once created, not by its "
        "class label).")


class PreemptionSpec(_Strict):
    enabled: bool = Field(True, description="Whether a gang that cannot fit may evict "
                          "lower-priority work, and a queue below its nominal reclaim it.")
    min_runtime: Duration = Field(
        "5m", alias="minRuntime", description="Pods that have run less than this are never "
        "preempted.")
    delay: Duration = Field(
        "30s", description="How long a complete gang waits for room before it may preempt.")
    requeue_backoff: Duration = Field(
        "2m", alias="requeueBackoff", description="How long a preempted gang waits before "
        "it is considered again, so two gangs never evict each other back and forth.")
    stale_gang_grace_period: Duration = Field(
        "10m", alias="staleGangGracePeriod", description="How long a running gang that lost "
        "members (a node lost, an eviction) waits for replacements to rejoin before the "
        "rest is evicted, so it starts again whole instead of holding GPUs it cannot use.")
    preferred_domain_premium: float = Field(
        1.5, ge=1.0, alias="preferredDomainPremium", description="For a gang whose topology "
        "is `preferred`: room is made in one domain of that level when its victims lose at "
        "most this many times the work of the cheapest victims anywhere, and are of no "
        "higher priority; else the gang is spread. `1` takes a domain only when it costs "
        "no more.")
    defragmentation: DefragmentationSpec = Field(
        default_factory=DefragmentationSpec, description="Moving movable pods out of one "
        "domain for the first in a queue when free GPUs add up but no domain holds it "
        "(docs/controller.md, \"Targeted defragmentation\").")
    checkpoint_grace: Duration = Field(
        "0s", alias="checkpointGrace", description="How long a victim has to save its work "
        "before it is evicted: it is told first (the annotation "
        "gpu-airlock.io/preemption-notice, a pod condition, an event), and evicted as soon "
        "as it states a checkpoint made since (gpu-airlock.io/checkpointed-at) or exits, "
        "or at this deadline. The preemptor's room is held meanwhile. `0s` evicts at once.")


def _literal(pattern: str) -> bool:
    return not any(c in pattern for c in "*?[")


def queue_problems(queues: Sequence[Queue], accelerators: Sequence[str]
                   ) -> Iterator[tuple[int, Loc, str]]:
    """Problems no single queue shows: a namespace in two queues, an unknown resource.
    Each as (index of the queue, path inside it, message), for the merger's `file:line`."""
    known = ", ".join(accelerators)
    for i, queue in enumerate(queues):
        for j, pattern in enumerate(queue.namespaces):
            for other in queues[:i]:
                hit = next((g for g in other.namespaces if g == pattern or (
                    _literal(pattern) and fnmatch.fnmatchcase(pattern, g))), None)
                if hit is not None and other.name != queue.name:
                    yield i, ("namespaces", j), (
                        f"queue {queue.name}: namespace {pattern!r} is already in queue "
                        f"{other.name}" + ("" if hit == pattern else f" (by {hit!r})"))
        for field, alias in (("nominal", "nominal"), ("borrowing_limit", "borrowingLimit"),
                             ("lending_limit", "lendingLimit")):
            for resource in getattr(queue, field) or {}:
                if resource not in accelerators:
                    yield i, (alias, resource), (
                        f"queue {queue.name}: {alias} names {resource!r}, which is not one of "
                        f"the policy's accelerators ({known})")


def model_quota_problems(queues: Sequence[Queue], models: Collection[str]
                         ) -> Iterator[tuple[int, Loc, str]]:
    """Quotas per model that name no model of `spec.gpuModels`, or one twice."""
    for i, queue in enumerate(queues):
        seen: set[str] = set()
        for j, quota in enumerate(queue.models):
            if quota.model not in models:
                yield i, ("models", j, "model"), (
                    f"queue {queue.name}: model {quota.model!r} is not one of the gpuModels "
                    f"({', '.join(models) or 'none defined'})")
            elif quota.model in seen:
                yield i, ("models", j, "model"), (
                    f"queue {queue.name}: model {quota.model!r} is listed twice")
            seen.add(quota.model)
