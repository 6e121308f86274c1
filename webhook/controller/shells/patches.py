"""What the applier writes onto pods, built without I/O so that tests check them as data:
the sealed record on the anchor, the gate lifted with the pod pinned to its domain and
its planned node (or, without an owner, preferring that node and kept off fenced nodes),
and the condition a victim keeps once evicted."""

from __future__ import annotations

import datetime
from typing import Any

from webhook.controller.core.placement.pins import pin_of
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import Record, Seal
from webhook.keys import GATE, PLACEMENT_ANNOTATION, PREEMPTION_NOTICE_CONDITION
from webhook.patchops import PatchOp, escape


def annotation_patch(pod: PodInfo, key: str, value: str) -> list[PatchOp]:
    if pod.annotated:
        return [{"op": "add", "path": f"/metadata/annotations/{escape(key)}", "value": value}]
    return [{"op": "add", "path": "/metadata/annotations", "value": {key: value}}]


def record_patch(pod: PodInfo, record: Record, seal: Seal) -> list[PatchOp]:
    """Write the decision onto the anchor pod, sealed to it, in the same JSON Patch that
    lifts the anchor's gate: atomic, so no gate is ever lifted before the record exists."""
    return annotation_patch(pod, PLACEMENT_ANNOTATION, seal.dumps(record, pod.uid))


def disruption_patch(message: str, now: datetime.datetime) -> dict[str, Any]:
    """The `DisruptionTarget` condition a victim keeps once evicted: what a Job's
    podFailurePolicy and people read to tell a preemption from a failure. The eviction
    sets its own (`EvictionByEvictionAPI`); this one says why, with Kubernetes' own
    reason for a preemption, so kube-scheduler knows the victim is going and does not
    preempt more for a pod nominated to its node."""
    return {"status": {"conditions": [{
        "type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
        "message": message[:1024],
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}]}}


def notice_condition(message: str, now: datetime.datetime) -> dict[str, Any]:
    """The condition that tells a victim, and people, that it is to be preempted and by
    when it may save its work (`preemption.notices`)."""
    return {"status": {"conditions": [{
        "type": PREEMPTION_NOTICE_CONDITION, "status": "True", "reason": "CheckpointRequested",
        "message": message[:1024],
        "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}]}}


def ungate_patch(pod: PodInfo, record: Record,
                 annotations: tuple[tuple[str, str], ...] = ()) -> list[PatchOp]:
    """Remove Airlock's gate and pin the pod to the recorded domain, to its slice's domain
    for a sliced gang, to its GPU model's nodes, and to the node the record plans for it
    (else off the nodes the record keeps it off), writing `annotations` too, in one JSON
    Patch. The `test` makes it fail, not misfire, if the gates moved since we read the
    pod."""
    index = pod.gate_index
    ops: list[PatchOp] = [
        {"op": "test", "path": f"/spec/schedulingGates/{index}/name", "value": GATE},
        {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
    ]
    for key, value in annotations:
        # Airlock's own marks are there: the annotations map exists.
        ops.append({"op": "add", "path": f"/metadata/annotations/{escape(key)}",
                    "value": value})
    pins: dict[str, str] = {}
    if record.domain is not None and record.topology_key:
        pins[record.topology_key] = record.domain
    if record.slice_key and (slice_domain := record.slice_of(pod.name)) is not None:
        pins[record.slice_key] = slice_domain
    pins.update(record.model_labels)
    if pins and not pod.constraints.node_selector:
        ops.append({"op": "add", "path": "/spec/nodeSelector", "value": pins})
    else:
        ops.extend({"op": "add", "path": f"/spec/nodeSelector/{escape(key)}", "value": value}
                   for key, value in pins.items())
    if (node := pin_of(record, pod)) is not None:
        # The node by its name, as the DaemonSet controller pins its pods for
        # kube-scheduler: not by the `kubernetes.io/hostname` label, which need not be
        # the node's name (a kubelet's --hostname-override), and which a pod's own
        # nodeSelector may hold (such a pod is not pinned: `placement.pins`). The
        # scheduler's NodeAffinity pre-filter then looks at that node alone. It is
        # narrower than any fence, since the plan kept the node off them.
        ops.extend(_node_affinity(pod, [_named("In", node)]))
    else:
        # One requirement per node: the apiserver takes one value per `metadata.name`
        # requirement. A pod without an owner only prefers its planned node: pinned
        # there, it would be stranded if the node failed, with nothing to make it again.
        ops.extend(_node_affinity(pod, [_named("NotIn", n) for n in record.fenced_off],
                                  preferred=record.node_of(pod.name)))
    return ops


_NODE_AFFINITY = "/spec/affinity/nodeAffinity"
_REQUIRED_KEY = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED_KEY = "preferredDuringSchedulingIgnoredDuringExecution"
_REQUIRED = f"{_NODE_AFFINITY}/{_REQUIRED_KEY}"
_PREFERRED = f"{_NODE_AFFINITY}/{_PREFERRED_KEY}"


def _named(operator: str, node: str) -> dict[str, Any]:
    return {"key": "metadata.name", "operator": operator, "values": [node]}


def _node_affinity(pod: PodInfo, requirements: list[dict[str, Any]],
                   preferred: str | None = None) -> list[PatchOp]:
    """A required node affinity that holds the pod to `requirements` (on `metadata.name`),
    and a preference for the node `preferred` at the most weight, kube-scheduler's
    NodeAffinity scoring then outweighing its spreading. A gated pod's required affinity
    may be narrowed, never widened; its preferred terms may change at will."""
    prefer = {"weight": 100, "preference": {"matchFields": [_named("In", preferred)]}} \
        if preferred is not None else None
    where = pod.constraints
    if where.affinity_terms is None and where.affinity_depth < 2:
        # No node affinity yet: one that holds both.
        node_affinity: dict[str, Any] = {}
        if requirements:
            node_affinity[_REQUIRED_KEY] = {
                "nodeSelectorTerms": [{"matchFields": requirements}]}
        if prefer is not None:
            node_affinity[_PREFERRED_KEY] = [prefer]
        if not node_affinity:
            return []
        if where.affinity_depth == 1:
            return [{"op": "add", "path": _NODE_AFFINITY, "value": node_affinity}]
        return [{"op": "add", "path": "/spec/affinity",
                 "value": {"nodeAffinity": node_affinity}}]
    ops = _narrow(pod, requirements) if requirements else []
    if prefer is not None:
        # Added to the pod's own preferred terms, not in their place.
        ops.append({"op": "add", "path": f"{_PREFERRED}/-", "value": prefer} if where.preferring
                   else {"op": "add", "path": _PREFERRED, "value": [prefer]})
    return ops


def _narrow(pod: PodInfo, requirements: list[dict[str, Any]]) -> list[PatchOp]:
    """`requirements` added to each term of the pod's required node affinity (they are
    ORed, so each must), or as its one term: a pod that has a node affinity."""
    if not pod.constraints.affinity_terms:
        return [{"op": "add", "path": _REQUIRED,
                 "value": {"nodeSelectorTerms": [{"matchFields": requirements}]}}]
    ops: list[PatchOp] = []
    for i, term in enumerate(pod.constraints.affinity_terms):
        if not term.get("matchExpressions") and not term.get("matchFields"):
            continue  # matches no node, and the apiserver lets it gain nothing
        fields = f"{_REQUIRED}/nodeSelectorTerms/{i}/matchFields"
        if term.get("matchFields"):
            ops.extend({"op": "add", "path": f"{fields}/-", "value": r} for r in requirements)
        else:
            ops.append({"op": "add", "path": fields, "value": requirements})
    return ops
