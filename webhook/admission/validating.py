"""Validation, split by operation. Each check returns a denial a person can act on;
odd-but-legal pods get warnings instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from webhook.admission import asking, prioritizing, slicing
from webhook.keys import (
    CLASS_LABEL,
    CONTROLLER_KEYS,
    GANG_LABEL,
    GANG_NAME_LABEL,
    GATE,
    GPU_FRACTION_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    LEGACY_GANG_LABEL,
    QUEUED_ANNOTATION,
)
from webhook.pods import PodView
from webhook.policy.classifying import Decision
from webhook.policy.gpumodels import named_models, unknown_models
from webhook.policy.model import Policy
from webhook.values import Refused, devices, shown

# Who creates a pod that names its node, and may: kubelets (mirror pods), cluster admins.
NODE_USER_PREFIX = "system:node:"
ADMIN_GROUP = "system:masters"
# Labels that tie a gated pod to its gang; changing them would orphan it.
_PINNED_LABELS = (CLASS_LABEL, GANG_LABEL, LEGACY_GANG_LABEL, GANG_NAME_LABEL)


class Verdict(NamedTuple):
    # Immutable and cheap to build on every request, like reviews.Response.
    denial: str | None = None
    warnings: tuple[str, ...] = ()

    @property
    def allowed(self) -> bool:
        return self.denial is None


def _accelerator_problem(pod: PodView, policy: Policy) -> str | None:
    accelerators = policy.accelerators
    for c in pod.all_containers():
        if not c.requests and not c.limits:
            continue
        for resource in accelerators:
            request, limit = c.requests.get(resource), c.limits.get(resource)
            if request is None and limit is None:
                continue
            counted: list[int] = []
            for section, q in (("requests", request), ("limits", limit)):
                if q is None:
                    continue
                found = devices(resource, q)
                if isinstance(found, Refused):
                    return (f"container {c.name}: resources.{section}.{found.message}: a "
                            f"container asks for whole devices (for part of a GPU, see "
                            f"{GPU_FRACTION_ANNOTATION})")
                counted.append(found)
            if limit is None:
                return (f"container {c.name}: requests {resource} without a limit; "
                        f"set resources.limits.{resource} to {request}")
            if len(set(counted)) > 1:
                return (f"container {c.name}: {resource} request {request} differs from its "
                        f"limit {limit}; they must be equal")
    return None


def _class_problem(pod: PodView, decision: Decision, policy: Policy) -> str | None:
    if decision.class_label_error:
        return decision.class_label_error
    allowed = policy.allowed_classes(pod.namespace)
    if decision.class_ is not None and decision.class_ not in allowed:
        return (f"namespace {pod.namespace} may not run {decision.class_} pods "
                f"(decided by {decision.reason}); allowed here: {', '.join(allowed) or 'none'}")
    pc = pod.priority_class_name
    owner = policy.priority_class_owner(pc) if pc else None
    if owner is not None and owner not in allowed:
        return (f"priorityClassName {pc} belongs to class {owner}, which namespace "
                f"{pod.namespace} may not use; allowed here: {', '.join(allowed) or 'none'}")
    return None


def _priority_problem(pod: PodView, decision: Decision, policy: Policy) -> str | None:
    """A priority above what policy gives the pod, still there after mutation."""
    if decision.class_ is None:
        return None
    escalation = prioritizing.judge(pod, decision.class_, policy).escalation
    if escalation is None:
        return None
    wanted = policy.classes[decision.class_].priority_class.name
    return (f"priorityClassName {pod.priority_class_name} is not this pod's to ask for: "
            f"{escalation}; remove it, and the pod gets class {decision.class_}'s {wanted}")


def _model_problem(pod: PodView, policy: Policy) -> str | None:
    text = pod.annotations.get(GPU_MODELS_ANNOTATION)
    why = None if text is None else unknown_models(text, policy.gpu_models)
    if why is not None:
        return f"annotation {GPU_MODELS_ANNOTATION} {why}"
    if pod.claim_problem is not None:
        return pod.claim_problem
    named = named_models(text)
    if named and pod.claim_models and not set(named) & set(pod.claim_models):
        return (f"annotation {GPU_MODELS_ANNOTATION} names {', '.join(named)}, but its DRA "
                f"claims select GPUs of {', '.join(pod.claim_models)}; name a model both allow")
    return None


def _forged_record(pod: PodView) -> str | None:
    for where, keys in (("annotation", pod.annotations), ("label", pod.labels)):
        for key in CONTROLLER_KEYS:
            if key in keys:
                return (f"{where} {key} is written only by the Airlock controller, on pods it "
                        f"has admitted, that preempt or that wait; remove it from the pod (or "
                        f"from its workload's pod template)")
    return None


def places_pods(username: str, groups: Sequence[str]) -> bool:
    """Whether the requester may create a pod that names its node: a kubelet, for the
    mirror of a static pod it runs whatever the API says (refusing the mirror would only
    hide a running pod from Airlock's counting), or a cluster admin, who could remove
    Airlock's webhooks anyway."""
    return username.startswith(NODE_USER_PREFIX) or ADMIN_GROUP in groups


def _node_problem(pod: PodView, places: bool) -> str | None:
    if pod.node_name is None or places:
        return None
    return (f"spec.nodeName {shown(pod.node_name)} puts the pod on a node directly, past the "
            f"scheduler and Airlock's queue and quota; remove it, and ask for the node with a "
            f"nodeSelector (kubernetes.io/hostname) instead")


def validate_create(pod: PodView, decision: Decision, policy: Policy,
                    places: bool = False) -> Verdict:
    """`places`: whether the requester `places_pods` on nodes itself."""
    # Wherever the pod is in scope or not: the controller reads records on every pod.
    if (forged := _forged_record(pod)) is not None:
        return Verdict(forged)
    if not decision.in_scope:
        return Verdict()
    problem = _class_problem(pod, decision, policy) or _priority_problem(pod, decision, policy) \
        or _node_problem(pod, places) or _accelerator_problem(pod, policy) \
        or _model_problem(pod, policy)
    if problem is None and slicing.asks(pod):
        problem = slicing.problem(pod, decision.class_, policy)
    gang = decision.gang
    if problem is None and gang is not None and gang.size_error:
        problem = f"gang {gang.name}: {gang.size_error}; set it to the number of pods in the gang"
    asks = asking.read(pod, gang, policy)
    problem = problem or asks.problem
    if problem:
        return Verdict(problem)
    warnings = list(asks.warnings)
    if decision.class_ is None:
        warnings.append("no Airlock policy rule classified this GPU pod; it keeps its priority")
    if gang is not None and gang.size is not None and gang.size > 1 \
            and GATE not in pod.gates and decision.class_ is not None \
            and policy.classes[decision.class_].gate_gangs:
        warnings.append(f"gang {gang.name} pod is not gated; it may start before its gang")
    return Verdict(warnings=tuple(warnings))


def validate_update(old: PodView, new: PodView, username: str, policy: Policy) -> Verdict:
    if GATE not in old.gates:
        return Verdict()
    if GATE not in new.gates and username not in policy.gate_removers:
        return Verdict(
            f"only the Airlock controller may remove the {GATE} scheduling gate ({username} "
            f"tried); it lifts the gate when the whole gang (or the queued pod) fits. See "
            f"`kubectl describe pod` events for why it waits"
        )
    for key in _PINNED_LABELS:
        if old.labels.get(key) != new.labels.get(key):
            return Verdict(
                f"label {key} cannot change while the pod waits for its gang "
                f"({old.labels.get(key)!r} -> {new.labels.get(key)!r}); delete and recreate "
                f"the pod instead"
            )
    if old.annotations.get(QUEUED_ANNOTATION) != new.annotations.get(QUEUED_ANNOTATION):
        # Without it the controller no longer sees the pod as queued: it would stay gated.
        return Verdict(
            f"annotation {QUEUED_ANNOTATION} cannot change while the pod waits in its queue; "
            f"delete and recreate the pod instead"
        )
    return Verdict()
