"""Mutation: what a class needs, as one JSON Patch. Pure and idempotent: applied to its
own output it returns no operations, because every step first checks what is there."""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping
from typing import Any, NamedTuple

from webhook.accelerators import to_record
from webhook.admission import asking, prioritizing, slicing
from webhook.admission.patches import PatchBuilder
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


def _priority(b: PatchBuilder, pod: PodView, cls: ClassName, policy: Policy) -> list[str]:
    judged = prioritizing.judge(pod, cls, policy)
    if not judged.replace:
        return [judged.note] if judged.note else []
    wanted = policy.classes[cls].priority_class.name
    # The Priority plugin has already resolved spec.priority from the old class; the
    # apiserver rejects a new class name next to a stale value, so both go.
    b.spec_field("priorityClassName", wanted)
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


def _node_affinity_exists(affinity: dict[str, Any], key: str) -> bool:
    """Require nodes that carry the topology label, in every term; True if changed."""
    requirement = {"key": key, "operator": "Exists"}
    node = affinity.setdefault("nodeAffinity", {})
    required = node.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    terms = required.setdefault("nodeSelectorTerms", [])
    if not terms:
        terms.append({"matchExpressions": [requirement]})
        return True
    changed = False
    for term in terms:
        exprs = term.setdefault("matchExpressions", [])
        if not any(e.get("key") == key for e in exprs):
            exprs.append(dict(requirement))
            changed = True
    return changed


def _preferred_pod_affinity(affinity: dict[str, Any], selector: dict[str, str], key: str,
                            weight: int) -> bool:
    term = {"labelSelector": {"matchLabels": selector}, "topologyKey": key}
    prefs = affinity.setdefault("podAffinity", {}).setdefault(
        "preferredDuringSchedulingIgnoredDuringExecution", []
    )
    if prefs and any(p.get("podAffinityTerm") == term for p in prefs):
        return False
    prefs.append({"weight": weight, "podAffinityTerm": term})
    return True


def _placement(b: PatchBuilder, pod: PodView, decision: Decision, spec: ClassSpec,
               policy: Policy, topology: TopologyPlacement | None) -> None:
    affinity: dict[str, Any] = copy.deepcopy(dict(pod.affinity)) if pod.affinity else {}
    changed = False
    gang = decision.gang
    if gang is not None and topology:
        key = policy.topology_levels[topology.level]
        if topology.mode == "required":
            changed |= _node_affinity_exists(affinity, key)
        else:
            changed |= _preferred_pod_affinity(
                affinity, {GANG_LABEL: _gang_label(gang.name)}, key, 100)
    elif gang is None and spec.placement != "none":
        key = policy.topology_levels[spec.placement_level]
        assert decision.class_ is not None
        if spec.placement == "pack":
            changed |= _preferred_pod_affinity(affinity, {CLASS_LABEL: decision.class_}, key, 50)
        elif not (pod.topology_spread
                  and any(c.get("topologyKey") == key for c in pod.topology_spread)):
            b.append("topologySpreadConstraints", {
                "maxSkew": 1,
                "topologyKey": key,
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {CLASS_LABEL: decision.class_}},
                "matchLabelKeys": ["pod-template-hash"],
            })
    if changed:
        b.spec_field("affinity", affinity)


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


def mutate(pod: PodView, decision: Decision, policy: Policy, operation: str) -> Mutation:
    """The patch that gives the pod what its class needs; empty when out of scope."""
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
    warnings = _priority(b, pod, decision.class_, policy)
    tolerations = spec.tolerations
    if sliced is not None:
        _slice(b, sliced, warnings)
        tolerations += sliced.offer.tolerations
    _tolerations(b, pod, tolerations)
    _placement(b, pod, decision, spec, policy, topology)
    if gated and GATE not in pod.gates:
        b.append("schedulingGates", {"name": GATE})
    b.strip(PREFIX, _marks_of_others)
    return Mutation(b.ops(), tuple(warnings))
