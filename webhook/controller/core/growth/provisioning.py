"""ProvisioningRequests (`spec.capacity.mode: provisioningRequest`, docs/autoscaling.md),
as the controller writes them and reads them back: one per gang that asks, in its
namespace, with a pod template per kind of pod it has (the pods stood in for as
placeholders would be) and the policy's class. The cluster-autoscaler (or GKE's Dynamic
Workload Scheduler) provisions the room and says so in the request's conditions; the
gang's pods, lifted into it, carry the annotations that consume the booking."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.controller.core.growth.asking import Asking
from webhook.controller.core.growth.placeholders import asking_of, digest, stand_in
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.keys import PLACEHOLDER_FOR_ANNOTATION, PLACEHOLDER_LABEL
from webhook.operators.clusterautoscaler.keys import (
    BOOKING_EXPIRED,
    CAPACITY_REVOKED,
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    FAILED,
    GROUP,
    PROVISIONED,
    VERSION,
)
from webhook.policy.gpumodels import GpuModel, model_named

# Conditions after which the request gives no room: the autoscaler gave up, the booking
# ran out before the pods came, or the room was taken back.
_ENDED = (FAILED, BOOKING_EXPIRED, CAPACITY_REVOKED)


def request_name(unit: UnitId) -> str:
    return f"airlock-{digest(unit)}"


def class_for(models: Sequence[GpuModel], model: str | None, default: str) -> str:
    """The ProvisioningRequest class for a gang of GPU `model`: the model's, else
    `default` (the policy's)."""
    found = model_named(models, model)
    return default if found is None or found.provisioning_class is None else \
        found.provisioning_class


def objects(unit: UnitId, pods: Sequence[PodInfo], provisioning_class: str,
            avoid: Sequence[str] = (), pins: Mapping[str, str] | None = None
            ) -> list[dict[str, Any]]:
    """The pod templates, then the request naming them: one pod set per kind of pod, on
    nodes with the labels it `pins` (its GPU model's)."""
    name, tag = request_name(unit), digest(unit)
    labels = {PLACEHOLDER_LABEL: tag}
    meta = {"namespace": unit.namespace, "labels": labels,
            "annotations": {PLACEHOLDER_FOR_ANNOTATION: f"{unit.kind}/{unit.path}"}}
    kinds: dict[Any, list[PodInfo]] = {}
    for pod in pods:
        kinds.setdefault(pod.fit, []).append(pod)
    names = [f"{name}-{i}" for i in range(len(kinds))]
    templates = [{"apiVersion": "v1", "kind": "PodTemplate",
                  "metadata": {**meta, "name": template},
                  "template": {"metadata": {"labels": labels},
                               "spec": stand_in(unit, alike[0], avoid, pins)}}
                 for template, alike in zip(names, kinds.values(), strict=True)]
    request = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "ProvisioningRequest",
               "metadata": {**meta, "name": name},
               "spec": {"provisioningClassName": provisioning_class,
                        "podSets": [{"podTemplateRef": {"name": template},
                                     "count": len(alike)}
                                    for template, alike in zip(names, kinds.values(),
                                                               strict=True)]}}
    return [*templates, request]


def request_of(obj: Mapping[str, Any]) -> Asking | None:
    """What a ProvisioningRequest the controller made stands for, and whether the
    autoscaler gave up on it."""
    conditions = (obj.get("status") or {}).get("conditions") or []
    ended = next((c for c in conditions
                  if c.get("type") in _ENDED and c.get("status") == "True"), None)
    failed = None if ended is None else \
        f"{ended['type']}: {ended.get('message') or ended.get('reason') or 'no reason given'}"
    ready = any(c.get("type") == PROVISIONED and c.get("status") == "True"
                for c in conditions)
    meta = obj.get("metadata") or {}
    found = asking_of(meta, failed, ready)
    # Requests live in the gangs' namespaces, where their users may write anything: one
    # counts only for the gang of its own namespace, under the name the controller gives
    # that gang's request, so no one can stall or end another namespace's request.
    if found is None or found.unit.namespace != meta.get("namespace") or \
            found.name != request_name(found.unit):
        return None
    return found


def consuming(unit: UnitId, provisioning_class: str) -> tuple[tuple[str, str], ...]:
    """The annotations that have the gang's pods take the room its request booked."""
    return ((CONSUME_ANNOTATION, request_name(unit)), (CLASS_ANNOTATION, provisioning_class))
