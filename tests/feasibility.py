"""Varied nodes and pods for the question the controller's filters answer in place of
kube-scheduler's: may this pod go to this node? Drawn from a seeded `random.Random`, so a
failure comes back with its seed. Nodes: zone, GPU product, pool and numeric labels,
taints of every effect, cordoned or NotReady, of different sizes. Pods: nodeSelectors,
required node affinity (every operator, matchFields, terms OR'ed), tolerations of every
form, requests of CPU, memory, ephemeral storage and GPUs (limits only, init containers
and sidecars too). And the controller's answer for a pair, from the code its rounds use;
`tests/e2e/test_scheduler_agreement.py` asks the real scheduler the same."""

from __future__ import annotations

import copy
import random
from collections.abc import Mapping
from typing import Any

from tests.builders import GPU, pod
from webhook.controller.core.cluster.snapshot import Snapshot, fits, with_pod_slot
from webhook.controller.core.pods import PodInfo
from webhook.keys import GANG_LABEL
from webhook.operators.kubernetes.keys import NOT_READY_TAINT, UNSCHEDULABLE_TAINT
from webhook.pools import COUNT_LABEL, PRODUCT_LABEL
from webhook.sandbox.nodes import HOST_LABEL, KWOK_NODE, node_manifest

Obj = dict[str, Any]

ZONE = "topology.kubernetes.io/zone"
POOL = "example.com/pool"
GENERATION = "example.com/generation"
# A label no node has.
ABSENT = "example.com/absent"
PRODUCTS = ("NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4")
# The generation holds texts Go's strconv.ParseInt refuses (an underscore, 20 digits)
# though Python's int() takes them: Gt and Lt match no node whose value is no int64.
LABELS: dict[str, tuple[str, ...]] = {
    ZONE: ("zone-a", "zone-b", "zone-c"),
    POOL: ("train", "serve", ""),
    GENERATION: ("3", "05", "12", "5_0", "99999999999999999999", "x7"),
}
# Gt and Lt bounds, with the same traps: a term holding a bound that is no int64 matches
# no node at all.
BOUNDS = ("0", "4", "07", "10", "1_0", "99999999999999999999")
TAINTS = (("nvidia.com/gpu", "present"), ("dedicated", "training"), ("dedicated", "serving"),
          ("example.com/maintenance", ""), ("example.com/spot", "true"))
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")
NODE_CPUS = ("4", "16", "96", "7500m")
NODE_MEMORIES = ("8Gi", "64Gi", "1024Gi", "16000000000")
POD_CPUS = ("100m", "500m", "1", "1500m", "2", "8", "20")
POD_MEMORIES = ("256Mi", "1Gi", "4Gi", "16Gi", "64Gi", "100G")


def varied_nodes(rng: random.Random, prefix: str, count: int, cordoned: int = 0,
                 not_ready: int = 0) -> list[Obj]:
    """`count` node manifests `{prefix}-00`...: the last `not_ready` NotReady, which KWOK
    does not manage (`tests.kube.not_ready_nodes` makes them), the `cordoned` before
    them cordoned."""
    nodes = []
    for i in range(count):
        gpus = rng.choice((0, 1, 4, 8))
        labels = {k: rng.choice(v) for k, v in LABELS.items() if rng.random() < 0.7}
        node = node_manifest(f"{prefix}-{i:02d}", gpus, labels, rng.choice(PRODUCTS),
                             taint=False)
        if not gpus:  # what GPU feature discovery labels is not there
            for key in (PRODUCT_LABEL, COUNT_LABEL):
                del node["metadata"]["labels"][key]
        resources = {"cpu": rng.choice(NODE_CPUS), "memory": rng.choice(NODE_MEMORIES),
                     "pods": rng.choice(("110", "110", "110", "3"))}
        if gpus:
            resources[GPU] = str(gpus)
        if rng.random() < 0.5:
            resources["ephemeral-storage"] = rng.choice(("20Gi", "500Gi"))
        node["status"] = {"capacity": resources, "allocatable": resources}
        taints: dict[tuple[str, str], Obj] = {}
        for _ in range(rng.choice((0, 0, 0, 1, 1, 2, 3))):
            (key, value), effect = rng.choice(TAINTS), rng.choice(EFFECTS)
            taints[key, effect] = {"key": key, "value": value, "effect": effect}
        node["spec"]["taints"] = list(taints.values())
        if i >= count - not_ready:
            _not_ready(node)
        elif i >= count - not_ready - cordoned:
            # As kube-controller-manager leaves a cordoned node, so the taint is there
            # from the start rather than appearing while pods are judged.
            node["spec"]["unschedulable"] = True
            node["spec"]["taints"].append({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"})
        nodes.append(node)
    return nodes


def _not_ready(node: Obj) -> None:
    """A node whose kubelet reports NotReady, with the taint it has from the start (the
    apiserver's TaintNodesByCondition); KWOK, which would make it Ready, leaves it
    alone. The node lifecycle controller adds a NoExecute one in its own time."""
    del node["metadata"]["annotations"][KWOK_NODE[0]]
    node["spec"]["taints"].append({"key": NOT_READY_TAINT, "effect": "NoSchedule"})
    node["status"]["conditions"] = [{"type": "Ready", "status": "False",
                                     "reason": "KubeletNotReady"}]


def kwok_managed(node: Mapping[str, Any]) -> bool:
    return (node["metadata"].get("annotations") or {}).get(KWOK_NODE[0]) == KWOK_NODE[1]


def varied_pods(rng: random.Random, count: int, nodes: list[str]) -> list[Obj]:
    """`count` pods `p00`... as users write them (no namespace), their constraints naming
    labels of `varied_nodes` and the node names `nodes`."""
    values = {**LABELS, PRODUCT_LABEL: PRODUCTS, COUNT_LABEL: ("1", "4", "8"),
              HOST_LABEL: tuple(nodes)}
    pods = []
    for i in range(count):
        b = pod(f"p{i:02d}")
        requests = {}
        if rng.random() < 0.7:
            requests["cpu"] = rng.choice(POD_CPUS)
        if rng.random() < 0.6:
            requests["memory"] = rng.choice(POD_MEMORIES)
        if rng.random() < 0.2:
            requests["ephemeral-storage"] = rng.choice(("1Gi", "50Gi"))
        b.resources(requests)
        if rng.random() < 0.5:
            gpus = str(rng.choice((1, 1, 2, 4, 8)))
            if rng.random() < 0.3:
                b.resources(limits={GPU: gpus})
            else:
                b.gpus(gpus)
        if rng.random() < 0.2:
            init: Obj = {"name": "init", "image": "busybox", "resources": {"requests": {
                "cpu": rng.choice(POD_CPUS), "memory": rng.choice(POD_MEMORIES)}}}
            if rng.random() < 0.5:
                init["restartPolicy"] = "Always"  # a sidecar, counted beside the app
            b.set("initContainers", [init])
        if rng.random() < 0.3:
            keys = rng.sample(sorted(values), rng.randint(1, 2))
            b.set("nodeSelector", {k: rng.choice(values[k]) for k in keys})
        if rng.random() < 0.6:
            terms = [_term(rng, values, nodes) for _ in range(rng.choice((1, 1, 2, 3)))]
            b.set("affinity", {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}})
        if rng.random() < 0.6:
            b.set("tolerations", [_toleration(rng) for _ in range(rng.randint(1, 3))])
        obj = b.build()
        del obj["metadata"]["namespace"]
        pods.append(obj)
    return pods


def _term(rng: random.Random, values: dict[str, tuple[str, ...]], nodes: list[str]) -> Obj:
    if rng.random() < 0.05:
        return {}  # matches no node
    term: Obj = {}
    expressions = [_expression(rng, values) for _ in range(rng.choice((0, 1, 1, 2, 3)))]
    if expressions:
        term["matchExpressions"] = expressions
    if not expressions or rng.random() < 0.2:
        term["matchFields"] = [{"key": "metadata.name", "operator": rng.choice(("In", "NotIn")),
                                "values": [rng.choice(nodes)]}]
    return term


def _expression(rng: random.Random, values: dict[str, tuple[str, ...]]) -> Obj:
    operator = rng.choice(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"))
    if operator in ("Gt", "Lt"):
        return {"key": rng.choice((GENERATION, COUNT_LABEL)), "operator": operator,
                "values": [rng.choice(BOUNDS)]}
    key = rng.choice((*sorted(values), ABSENT))
    if operator in ("Exists", "DoesNotExist"):
        return {"key": key, "operator": operator}
    pool = values.get(key, ("anything",))
    return {"key": key, "operator": operator,
            "values": rng.sample(pool, rng.randint(1, min(2, len(pool))))}


def _toleration(rng: random.Random) -> Obj:
    key, value = rng.choice((*TAINTS, (NOT_READY_TAINT, ""), (UNSCHEDULABLE_TAINT, "")))
    effect = rng.choice(EFFECTS)
    # Tolerating every taint is the rarest form, or it would hide the others.
    form = rng.choices(range(7), weights=(1, 3, 3, 3, 3, 3, 2))[0]
    if form == 0:
        return {"operator": "Exists"}
    if form == 1:
        return {"operator": "Exists", "effect": effect}
    if form == 2:
        return {"key": key, "operator": "Exists"}
    if form == 3:
        return {"key": key, "operator": "Exists", "effect": effect}
    if form == 4:
        return {"key": key, "value": value}  # no operator is Equal, no effect any
    if form == 5:
        return {"key": key, "operator": "Equal", "value": rng.choice((value, "other")),
                "effect": effect}
    return {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 3600}


PIN_KEY = "metadata.name"


def pinned(obj: Mapping[str, Any], node: str) -> Obj:
    """The pod held to `node` and otherwise as it was: a required matchFields term on
    the node's name ANDed into each of its terms (or its only term). An empty term is
    left empty, since with the pin in it would match the node."""
    out = copy.deepcopy(dict(obj))
    pin = {"key": PIN_KEY, "operator": "In", "values": [node]}
    affinity = out["spec"].setdefault("affinity", {}).setdefault("nodeAffinity", {})
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchFields": [pin]}]}
        return out
    for term in required["nodeSelectorTerms"]:
        if term.get("matchExpressions") or term.get("matchFields"):
            term["matchFields"] = [*term.get("matchFields", ()), pin]
    return out


def unpinned(stored: Mapping[str, Any], written: Mapping[str, Any]) -> Obj:
    """The pod as the apiserver stored it (defaults, admission's tolerations) but with
    the affinity its user wrote, without the pin."""
    out = copy.deepcopy(dict(stored))
    out["spec"].pop("affinity", None)
    if "affinity" in written["spec"]:
        out["spec"]["affinity"] = copy.deepcopy(written["spec"]["affinity"])
    return out


def as_member(obj: Mapping[str, Any]) -> PodInfo:
    """The pod as the controller reads a gang member: it keeps the constraints of the
    pods it decides only, and the webhook's gang label is what makes a pod one."""
    raw = copy.deepcopy(dict(obj))
    raw["metadata"].setdefault("labels", {})[GANG_LABEL] = "agreement"
    return PodInfo.parse(raw)


def admits(snap: Snapshot, member: PodInfo, node: str) -> bool:
    """Whether the controller would place `member` on `node`, as its best fit asks: the
    node is one the pod may use at all, and has room for it after the pods bound there."""
    return node in snap.eligible_set(member) and \
        fits(snap.free[node], with_pod_slot(member.requests))
