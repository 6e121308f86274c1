"""What the applier writes onto pods, built without I/O so that tests check them as data:
the sealed record on the anchor, the gate lifted with the pod pinned to its domain and
its planned node (or kept off fenced nodes), and the condition a victim keeps once
evicted."""

from __future__ import annotations

import datetime
from typing import Any

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
    if (node := record.node_of(pod.name)) is not None:
        # The node by its name, as the DaemonSet controller pins its pods for
        # kube-scheduler: not by the `kubernetes.io/hostname` label, which need not be
        # the node's name (a kubelet's --hostname-override), and which a pod's own
        # nodeSelector may hold (such a pod is not pinned: `placement.pins`). The
        # scheduler's NodeAffinity pre-filter then looks at that node alone. It is
        # narrower than any fence, since the plan kept the node off them.
        ops.extend(_narrow(pod, [{"key": "metadata.name", "operator": "In",
                                  "values": [node]}]))
    elif record.fenced_off:
        # One requirement per node: the apiserver takes one value per `metadata.name`
        # requirement.
        ops.extend(_narrow(pod, [{"key": "metadata.name", "operator": "NotIn", "values": [n]}
                                 for n in record.fenced_off]))
    return ops


_REQUIRED = "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution"


def _narrow(pod: PodInfo, requirements: list[dict[str, Any]]) -> list[PatchOp]:
    """A required node affinity that holds the pod to `requirements` (on `metadata.name`):
    added to each of its terms (they are ORed, so each must), or as the one term. A
    gated pod's required affinity may be narrowed this way, never widened."""
    if pod.constraints.affinity_terms:
        ops: list[PatchOp] = []
        for i, term in enumerate(pod.constraints.affinity_terms):
            if not term.get("matchExpressions") and not term.get("matchFields"):
                continue  # matches no node, and the apiserver lets it gain nothing
            fields = f"{_REQUIRED}/nodeSelectorTerms/{i}/matchFields"
            if term.get("matchFields"):
                ops.extend({"op": "add", "path": f"{fields}/-", "value": r}
                           for r in requirements)
            else:
                ops.append({"op": "add", "path": fields, "value": requirements})
        return ops
    required: dict[str, Any] = {"nodeSelectorTerms": [{"matchFields": requirements}]}
    if pod.constraints.affinity_terms is not None or pod.constraints.affinity_depth == 2:
        return [{"op": "add", "path": _REQUIRED, "value": required}]
    node_affinity = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if pod.constraints.affinity_depth == 1:
        return [{"op": "add", "path": "/spec/affinity/nodeAffinity", "value": node_affinity}]
    return [{"op": "add", "path": "/spec/affinity", "value": {"nodeAffinity": node_affinity}}]
