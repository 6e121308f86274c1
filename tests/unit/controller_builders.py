"""Builders for the controller's unit tests: typed views of nodes and gang members in one
line each, parsed from the same raw JSON shapes the watches deliver."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.accelerators import Accelerators
from webhook.controller.deciding import POLICY_DEFAULT, Admit, Wait
from webhook.controller.objects import NodeInfo, PodInfo
from webhook.controller.snapshot import Snapshot
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GATE,
    PLACEMENT_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)

CLIQUE = "nvidia.com/gpu.clique"
GPU = "nvidia.com/gpu"
NOW = 1_900_000_000.0


def node(name: str, domain: str | None, gpus: int = 8, resource: str = GPU, **extra: Any
         ) -> NodeInfo:
    labels = {"kubernetes.io/hostname": name, **extra.get("labels", {})}
    if domain:
        labels[CLIQUE] = domain
    raw = {"metadata": {"name": name, "labels": labels},
           "spec": {"taints": extra.get("taints", []),
                    "unschedulable": extra.get("unschedulable", False)},
           "status": {"allocatable": {resource: str(gpus), "cpu": "96",
                                      "memory": "1Ti", "pods": "110"},
                      "conditions": [{"type": "Ready",
                                      "status": extra.get("ready", "True")}]}}
    return NodeInfo.parse(raw)


def cluster(domains: dict[str, int], gpus: int = 8, resource: str = GPU) -> list[NodeInfo]:
    """`domains`: domain name -> number of nodes."""
    return [node(f"{d}-n{i}", d, gpus, resource) for d, count in domains.items()
            for i in range(count)]


def member(gang: str, i: int, gpus: int = 8, size: int | None = None, **kw: Any) -> PodInfo:
    return PodInfo.parse(raw_member(gang, i, gpus, size, **kw))


def raw_member(gang: str, i: int, gpus: int = 8, size: int | None = None, *,
               gated: bool = True, mode: str = "required", priority: int = 0,
               created: int = 0, ns: str = "ml", node_name: str | None = None,
               placement: str | None = None, name: str | None = None,
               resource: str = GPU, recorded: str | None = None,
               **spec: Any) -> dict[str, Any]:
    """A gang member as the watch delivers it."""
    annotations = {TOPOLOGY_KEY_ANNOTATION: CLIQUE, TOPOLOGY_MODE_ANNOTATION: mode}
    if size is not None:
        annotations[GANG_EXPECTED_SIZE_ANNOTATION] = str(size)
    if placement:
        annotations[PLACEMENT_ANNOTATION] = placement
    if recorded is not None:
        annotations[ACCELERATORS_ANNOTATION] = recorded
    return {
        "metadata": {"name": name or f"{gang}-{i}", "namespace": ns,
                     "labels": {GANG_LABEL: gang}, "annotations": annotations,
                     "creationTimestamp": f"2026-11-22T10:{created:02d}:{i:02d}Z"},
        "spec": {"priority": priority, "nodeName": node_name,
                 "schedulingGates": [{"name": GATE}] if gated else [],
                 "containers": [{"name": "c", "resources": {
                     "requests": {resource: str(gpus), "cpu": "8"},
                     "limits": {resource: str(gpus)}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], **spec},
    }


def gang(name: str, n: int, gpus: int = 8, **kw: Any) -> list[PodInfo]:
    return [member(name, i, gpus, size=n, **kw) for i in range(n)]


def snapshot(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo] = (),
             accelerators: Accelerators = POLICY_DEFAULT) -> Snapshot:
    return Snapshot(nodes, pods, accelerators)


def admitted(actions: list[Any]) -> dict[str, str | None]:
    return {a.gang[1]: a.record.domain for a in actions if isinstance(a, Admit)}


def waits(actions: list[Any]) -> dict[str, str]:
    return {a.gang[1]: a.message for a in actions if isinstance(a, Wait)}
