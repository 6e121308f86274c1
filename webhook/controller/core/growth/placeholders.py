"""Placeholder pods, as the controller writes them and reads them back: one per pod of a
gang that asks the cluster to grow (`growing`), in its image as far as the autoscaler
looks (requests, node selection, tolerations, one domain), at the lowest priority and
never preempting, so they block nothing and give way to any pod.

They live in SYSTEM_NAMESPACE, where only Airlock creates pods: what the controller reads
back there it wrote itself. That namespace enforces the restricted Pod Security level,
which they meet."""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from webhook.controller.core.growth.asking import Asking
from webhook.controller.core.identities import UnitId, UnitKind
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo, timestamp
from webhook.devices.kinds import PREFIX as DRA_PREFIX
from webhook.keys import (
    PLACEHOLDER_FOR_ANNOTATION,
    PLACEHOLDER_LABEL,
    PLACEHOLDER_PRIORITY_CLASS,
    SYSTEM_NAMESPACE,
)
from webhook.policy.gpumodels import GpuModel, model_named

IMAGE = "registry.k8s.io/pause:3.10"
_KINDS: dict[str, UnitKind] = {"gang": "gang", "pod": "pod"}


def digest(unit: UnitId) -> str:
    """The unit as a label value and name part: the same on every controller."""
    return hashlib.sha256(f"{unit.kind}/{unit.path}".encode()).hexdigest()[:12]


def _quantity(resource: str, amount: int) -> str:
    return f"{amount}m" if resource == "cpu" else str(amount)


def too_small(nodes: Iterable[NodeInfo], key: str, pods: Sequence[PodInfo]) -> list[str]:
    """The domains (values of `key`) whose nodes, even empty, could not hold all the
    `pods` ask for of extended resources: a gang that fits no domain it must share needs
    one that grows, so its placeholders keep out of these."""
    need: Counter[str] = Counter()
    for pod in pods:
        need.update({k: v for k, v in pod.requests.items()
                     if "/" in k and not k.startswith(DRA_PREFIX)})
    totals: dict[str, Counter[str]] = {}
    for node in nodes:
        if key in node.labels:
            totals.setdefault(node.labels[key], Counter()).update(node.allocatable)
    return sorted(domain for domain, total in totals.items()
                  if any(total[r] < n for r, n in need.items()))


def _keeping_out(terms: Sequence[Mapping[str, Any]], key: str, avoid: Sequence[str]
                 ) -> list[dict[str, Any]]:
    """The pod's node selector terms, each also keeping out of the `avoid` domains."""
    out = {"key": key, "operator": "NotIn", "values": list(avoid)}
    return [{**term, "matchExpressions": [*term.get("matchExpressions", ()), out]}
            for term in terms or ({},)]


def requested(models: Sequence[GpuModel], model: str | None) -> dict[str, str]:
    """The node labels a request for GPU `model`'s nodes selects (no model: none)."""
    found = model_named(models, model)
    return {} if found is None else found.requested_labels()


def manifest(unit: UnitId, pod: PodInfo, index: int, avoid: Sequence[str] = (),
             pins: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The placeholder for the `index`th pod of `unit`, kept out of the `avoid` domains
    (of its topology key), on nodes with the labels it `pins` (its GPU model's)."""
    tag = digest(unit)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"airlock-placeholder-{tag}-{index}",
                         "namespace": SYSTEM_NAMESPACE,
                         "labels": {PLACEHOLDER_LABEL: tag},
                         "annotations": {PLACEHOLDER_FOR_ANNOTATION:
                                         f"{unit.kind}/{unit.path}"}},
            "spec": stand_in(unit, pod, avoid, pins)}


def stand_in(unit: UnitId, pod: PodInfo, avoid: Sequence[str] = (),
             pins: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The spec of a pod that stands in for `pod` before an autoscaler: a placeholder's,
    or a ProvisioningRequest's pod template; on nodes with the labels it `pins` (the
    GPU model the gang waits for: the autoscaler then grows that model's nodes)."""
    tag = digest(unit)
    # A DRA claim cannot be copied onto a placeholder: what it asks for is left out.
    requests = {k: _quantity(k, v) for k, v in sorted(pod.requests.items())
                if not k.startswith(DRA_PREFIX)}
    # Extended resources are requested at their limit, as the apiserver requires.
    limits = {k: v for k, v in requests.items() if "/" in k}
    affinity: dict[str, Any] = {}
    terms: Sequence[Mapping[str, Any]] = pod.constraints.affinity_terms or ()
    if pod.marks.topology_key and avoid:
        terms = _keeping_out(terms, pod.marks.topology_key, avoid)
    if terms:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": list(terms)}}
    if pod.marks.topology_key:
        # All in one domain, as the gang must (or should) be: the autoscaler then adds
        # nodes the gang can share.
        affinity["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {PLACEHOLDER_LABEL: tag}},
            "topologyKey": pod.marks.topology_key}]}
    spec: dict[str, Any] = {
        "priorityClassName": PLACEHOLDER_PRIORITY_CLASS,
        "terminationGracePeriodSeconds": 0,
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65535,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [{
            "name": "placeholder", "image": IMAGE,
            "resources": {"requests": requests, **({"limits": limits} if limits else {})},
            "securityContext": {"allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]}}}],
        "tolerations": list(pod.constraints.tolerations),
    }
    if pod.constraints.node_selector or pins:
        spec["nodeSelector"] = {**pod.constraints.node_selector, **(pins or {})}
    if affinity:
        spec["affinity"] = affinity
    return spec


def placeholder_of(obj: Mapping[str, Any]) -> Asking | None:
    """The placeholder a pod is, when it is one the controller made."""
    meta = obj.get("metadata") or {}
    if meta.get("namespace") != SYSTEM_NAMESPACE:
        return None
    return asking_of(meta, ready=bool((obj.get("spec") or {}).get("nodeName")))


def asking_of(meta: Mapping[str, Any], failed: str | None = None,
              ready: bool = False) -> Asking | None:
    """What an object the controller made to ask for room stands for, from its
    metadata: its label, and the unit its annotation names."""
    if PLACEHOLDER_LABEL not in (meta.get("labels") or {}):
        return None
    kind, _, path = ((meta.get("annotations") or {}).get(PLACEHOLDER_FOR_ANNOTATION) or ""
                     ).partition("/")
    namespace, _, name = path.partition("/")
    unit_kind = _KINDS.get(kind)
    if unit_kind is None or not namespace or not name:
        return None
    return Asking(meta.get("name", ""), UnitId(unit_kind, namespace, name),
                  timestamp(meta.get("creationTimestamp")), failed, ready)
