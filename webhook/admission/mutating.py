"""Mutation: what a class needs, as one JSON Patch. Pure and idempotent: applied to its
own output it returns no operations, because every step first checks what is there."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.accelerators import to_record
from webhook.admission import asking, prioritizing, slicing
from webhook.admission.modelpins import model_affinity
from webhook.admission.patches import PatchBuilder
from webhook.admission.priorities import UNKNOWN, Priorities
from webhook.conventions.base import label_value
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CLASS_LABEL,
    CONTROLLER_KEYS,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GANG_SOURCE_ANNOTATION,
    GATE,
    PREFIX,
    QUEUED_ANNOTATION,
    RULE_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
    SLICE_KEY_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    ClassName,
    airlocks_own,
)
from webhook.memos import ShortMemo
from webhook.operators.karpenter.keys import DO_NOT_DISRUPT
from webhook.patchops import PatchOp
from webhook.pods import PodView
from webhook.policy.classifying import Decision
from webhook.policy.model import ClassSpec, Policy, Toleration, TopologyPlacement
from webhook.policy.slices import WHOLE_GPU


class Mutation(NamedTuple):
    # Immutable and cheap to build on every request, like reviews.Response.
    patch: list[PatchOp]
    warnings: tuple[str, ...] = ()


# What makes two tolerations the same (the operator defaults to Equal). A tuple, not a
# set member: a malformed pod's values need not be hashable.
_TolerationKey = tuple[object, object, object, object]


# Memoized, as a pod's gang's name and its accelerators are the same for every pod of a
# gang and nearly every pod of a cluster; computed, they cost a tenth of a mutation. The
# accelerators are asked of what the pod requests of the policy's, never of any name it
# wrote, so that what is kept is bounded by the policy.
_gang_label = ShortMemo(label_value, size=1024)
_accelerators_record = functools.lru_cache(maxsize=256)(to_record)


def _toleration_key(t: Mapping[str, Any]) -> _TolerationKey:
    return t.get("key"), t.get("operator", "Equal"), t.get("value"), t.get("effect")


def _gated(pod: PodView, decision: Decision, spec: ClassSpec, policy: Policy,
           operation: str) -> bool:
    """Whether the pod waits for the controller: a gang member whose class gates gangs,
    or a single pod whose class queues. Gates can be added only when a pod is created,
    and never beside a node name (the apiserver rejects such a pod); a pod another system
    holds waits for that system, not in a queue of Airlock's too."""
    if operation != "CREATE" or pod.node_name is not None or decision.held is not None:
        return False
    assert decision.class_ is not None
    return spec.gate_gangs if decision.gang is not None else policy.queued(decision.class_)


def _topology(pod: PodView, spec: ClassSpec, policy: Policy, asks: asking.Asks
              ) -> TopologyPlacement | None:
    """Where a gang's pods must (or should) be together: the level the pod asks for, else
    its class's topology; but when they claim a DeviceClass whose devices work only
    inside one domain (an NVIDIA ComputeDomain's IMEX channels, in one NVLink domain),
    that level, required, whatever else is asked."""
    if pod.devices:
        for kind in policy.device_kinds.values():
            if kind.level is not None and kind.resource in pod.devices:
                return TopologyPlacement(level=kind.level, mode="required")
    return asks.topology or spec.topology


def _record(b: PatchBuilder, pod: PodView, resources: frozenset[str], decision: Decision,
            policy: Policy, gated: bool, asks: asking.Asks,
            topology: TopologyPlacement | None) -> None:
    assert decision.class_ is not None
    b.label(CLASS_LABEL, decision.class_)
    if decision.rule:
        b.annotation(RULE_ANNOTATION, decision.rule)
    if accelerators := _accelerators_record(policy.gpu_resources,
                                            resources.intersection(policy.gpu_resources)):
        b.annotation(ACCELERATORS_ANNOTATION, accelerators)
    if decision.class_ in policy.capacity.protect and DO_NOT_DISRUPT not in pod.annotations:
        # A value the pod states is its author's to keep.
        b.annotation(DO_NOT_DISRUPT, "true")
    gang = decision.gang
    if asks.runtime is not None and (gang is not None or gated):
        b.annotation(RUNTIME_SECONDS_ANNOTATION, str(asks.runtime))
    if gang is None:
        if gated:
            b.annotation(QUEUED_ANNOTATION, "true")
        return
    b.label(GANG_LABEL, _gang_label(gang.name))
    b.annotation(GANG_SOURCE_ANNOTATION, gang.source)
    if gang.size is not None:
        b.annotation(GANG_EXPECTED_SIZE_ANNOTATION, str(gang.size))
    if asks.minimum is not None:
        b.annotation(GANG_EXPECTED_MIN_ANNOTATION, str(asks.minimum))
    if topology:
        b.annotation(TOPOLOGY_KEY_ANNOTATION, policy.topology_levels[topology.level])
        b.annotation(TOPOLOGY_MODE_ANNOTATION, topology.mode)
    if asks.slices is not None:
        b.annotation(SLICE_KEY_ANNOTATION, asks.slices.key)
        b.annotation(SLICE_EXPECTED_SIZE_ANNOTATION, str(asks.slices.size))
        if asks.slices.number is not None:
            b.annotation(SLICE_INDEX_ANNOTATION, str(asks.slices.number))


def _priority(b: PatchBuilder, pod: PodView, cls: ClassName, policy: Policy,
              priorities: Priorities) -> list[str]:
    judged = prioritizing.judge(pod, cls, policy)
    if not judged.replace:
        return [judged.note] if judged.note else []
    wanted = policy.classes[cls].priority_class.name
    b.spec_field("priorityClassName", wanted)
    # The Priority plugin has already resolved spec.priority from the old class, and
    # rejects a new class name next to a stale value. Written as the PriorityClass object
    # gives them, the plugin, run again after the webhooks, changes nothing, and the
    # apiserver does not call the webhook again; unknown, both go and the plugin fills
    # them in (docs/admission.md, "One call per pod").
    given = priorities.get(wanted)
    if given is not None:
        b.spec_field("priority", given.value)
        b.spec_field("preemptionPolicy", given.preemption)
    else:
        if pod.priority is not None:
            b.remove_spec_field("priority")
        if pod.has_preemption_policy:
            b.remove_spec_field("preemptionPolicy")
    if judged.escalation is None:
        return []
    return [f"replaced priorityClassName {pod.priority_class_name} with {wanted}: "
            f"{judged.escalation}"]


def _tolerations(b: PatchBuilder, pod: PodView, tolerations: tuple[Toleration, ...]) -> None:
    present = [_toleration_key(p) for p in pod.tolerations]
    for t in tolerations:
        if t.identity not in present:
            b.append("tolerations", t.k8s)
            present.append(t.identity)


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


# The two below return the pod's affinity changed, or None when it needs no change. Only
# what changes is copied: the rest is shared with the pod, as copying a hostile pod's
# 40,000 terms whole would take a tenth of a second.

def _node_label_required(affinity: Mapping[str, Any], key: str) -> dict[str, Any] | None:
    """Nodes that carry the topology label, required in every term."""
    requirement = {"key": key, "operator": "Exists"}
    node = _map(affinity.get("nodeAffinity"))
    required = _map(node.get(_REQUIRED))
    terms = _list(required.get("nodeSelectorTerms"))
    changed = [{"matchExpressions": [requirement]}] if not terms else None
    for i, term in enumerate(terms):
        exprs = _list(_map(term).get("matchExpressions"))
        if not any(_map(e).get("key") == key for e in exprs):
            changed = changed or list(terms)
            changed[i] = {**_map(term), "matchExpressions": [*exprs, dict(requirement)]}
    if changed is None:
        return None
    return {**affinity, "nodeAffinity": {
        **node, _REQUIRED: {**required, "nodeSelectorTerms": changed}}}


def _preferred_pod_affinity(affinity: Mapping[str, Any], selector: dict[str, str], key: str,
                            weight: int) -> dict[str, Any] | None:
    """A preference for the nodes of pods `selector` matches, within a domain of `key`."""
    term = {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
    pod_affinity = _map(affinity.get("podAffinity"))
    prefs = _list(pod_affinity.get(_PREFERRED))
    if any(_map(p).get("podAffinityTerm") == term for p in prefs):
        return None
    return {**affinity, "podAffinity": {
        **pod_affinity, _PREFERRED: [*prefs, {"weight": weight, "podAffinityTerm": term}]}}


def _spread(b: PatchBuilder, pod: PodView, cls: ClassName, key: str) -> None:
    if pod.topology_spread and any(c.get("topologyKey") == key for c in pod.topology_spread):
        return
    b.append("topologySpreadConstraints", {
        "maxSkew": 1,
        "topologyKey": key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {CLASS_LABEL: cls}},
        "matchLabelKeys": ["pod-template-hash"],
    })


def _placement(b: PatchBuilder, pod: PodView, decision: Decision, spec: ClassSpec,
               policy: Policy, topology: TopologyPlacement | None) -> dict[str, Any] | None:
    """The pod's affinity as its class's placement changes it, or None (no change)."""
    gang, cls = decision.gang, decision.class_
    assert cls is not None
    if gang is None and spec.placement == "spread":
        _spread(b, pod, cls, policy.topology_levels[spec.placement_level])
        return None
    if (gang is None and spec.placement == "none") or (gang is not None and topology is None):
        return None
    if gang is None:
        return _preferred_pod_affinity(
            pod.affinity, {CLASS_LABEL: cls}, policy.topology_levels[spec.placement_level], 50)
    assert topology is not None
    key = policy.topology_levels[topology.level]
    return _node_label_required(pod.affinity, key) if topology.mode == "required" \
        else _preferred_pod_affinity(pod.affinity, {GANG_LABEL: _gang_label(gang.name)},
                                     key, 100)


def _affinity(b: PatchBuilder, pod: PodView, policy: Policy, placed: dict[str, Any] | None,
              gated: bool, warnings: list[str]) -> None:
    """The placement's affinity, and for a pod the controller never places (not gated),
    the GPU models it may get (`modelpins`)."""
    changed = placed
    if not gated:
        kept, why = model_affinity(pod, policy, placed if placed is not None else pod.affinity)
        changed = kept if kept is not None else changed
        if why is not None:
            warnings.append(f"not kept to its GPU models: {why}")
    if changed is not None:
        b.spec_field("affinity", changed)


def _slice(b: PatchBuilder, sliced: slicing.Mapping, warnings: list[str]) -> None:
    offer = sliced.offer
    for containers, index, c in sliced.containers:
        for section, quantities in (("requests", c.requests), ("limits", c.limits)):
            if WHOLE_GPU in quantities:
                b.swap_resource(containers, index, section, WHOLE_GPU, offer.resource, "1")
    for key, value in offer.node_selector.items():
        b.node_selector(key, value)
    if sliced.containers:
        warnings.append(sliced.note())


def _marks_of_others(key: str) -> bool:
    """Airlock's own keys a pod came with, which the webhook did not write (it writes them
    at creation only): whoever wrote them, they are not Airlock's marks. The controller's
    records are left for validation to refuse, with a message."""
    return airlocks_own(key) and key not in CONTROLLER_KEYS


def mutate(pod: PodView, decision: Decision, policy: Policy, operation: str,
           priorities: Priorities = UNKNOWN) -> Mutation:
    """The patch that gives the pod what its class needs; empty when out of scope.
    `priorities`: the cluster's PriorityClasses, as far as they are known."""
    if not decision.in_scope:
        return Mutation([])
    if decision.class_ is None:
        b = PatchBuilder(pod.raw)
        b.strip(PREFIX, _marks_of_others)
        return Mutation(b.ops())
    spec = policy.classes[decision.class_]
    b = PatchBuilder(pod.raw)
    sliced = slicing.mapping(pod, decision.class_, policy) if slicing.asks(pod) else None
    gated = _gated(pod, decision, spec, policy, operation)
    asks = asking.read(pod, decision.gang, policy)
    topology = _topology(pod, spec, policy, asks) if decision.gang is not None else None
    _record(b, pod, pod.resources if sliced is None else sliced.resources(pod.resources),
            decision, policy, gated, asks, topology)
    warnings = _priority(b, pod, decision.class_, policy, priorities)
    tolerations = spec.tolerations
    if sliced is not None:
        _slice(b, sliced, warnings)
        tolerations += sliced.offer.tolerations
    _tolerations(b, pod, tolerations)
    _affinity(b, pod, policy, _placement(b, pod, decision, spec, policy, topology), gated,
              warnings)
    if gated and GATE not in pod.gates:
        b.append("schedulingGates", {"name": GATE})
    b.strip(PREFIX, _marks_of_others)
    return Mutation(b.ops(), tuple(warnings))
