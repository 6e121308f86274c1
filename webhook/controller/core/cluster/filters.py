"""Whether a pod may go to a node at all, as the scheduler's filters decide it: taints
and tolerations, nodeSelector, required node affinity, cordoned nodes, and nodes that
offer none of an extended resource (an accelerator) the pod requests. And one the
scheduler does not have: nothing goes to a NotReady node, whatever it tolerates."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.operators.kubernetes.keys import UNSCHEDULABLE_TAINT

_BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# The scheduler's NodeUnschedulable filter lets onto a cordoned node a pod that tolerates
# this taint (as a DaemonSet's pods do), whether the node carries it yet or not.
_CORDON = {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
_DECIMAL = re.compile(r"[+-]?[0-9]+")


def _tolerated(taint: Mapping[str, Any], tolerations: tuple[Mapping[str, Any], ...]) -> bool:
    for t in tolerations:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (
                taint.get("value") or ""):
            return True
    return False


def _requirement(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op, values = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        have, bound = _int64(labels[key]), _int64(values[0])
        if have is None or bound is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return False


def _int64(text: Any) -> int | None:
    """A label value or a bound as Go's strconv.ParseInt(text, 10, 64) reads it for Gt and
    Lt, None where it fails (and the scheduler's term matches no node). Python's int()
    would also take "5_0", spaces, other scripts' digits and numbers of any size."""
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text):
        return None
    value = int(text)
    return value if -(2**63) <= value < 2**63 else None


def _term(term: Mapping[str, Any], node: NodeInfo) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches no node
    if not all(_requirement(e, node.labels) for e in exprs):
        return False
    return all(_requirement(f, {"metadata.name": node.name}) for f in fields)


def eligible(pod: PodInfo, node: NodeInfo) -> bool:
    if not node.ready:
        return False
    where = pod.constraints
    if node.unschedulable and not _tolerated(_CORDON, where.tolerations):
        return False
    if any(node.allocatable.get(k, 0) <= 0 for k in where.devices):
        return False
    if any(node.labels.get(k) != v for k, v in where.node_selector.items()):
        return False
    if where.affinity_terms is not None and not any(_term(t, node) for t in where.affinity_terms):
        return False
    return all(taint.get("effect") not in _BLOCKING_EFFECTS or _tolerated(taint, where.tolerations)
               for taint in node.taints)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A label selector (`matchLabels`, `matchExpressions`) over labels. An empty selector
    selects everything, as for a PodDisruptionBudget in policy/v1."""
    selector = selector or {}
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_requirement(e, labels) for e in selector.get("matchExpressions") or ())
