"""Fake GPU nodes: Node objects with capacity, topology labels and a Ready status, and
no kubelet. Nothing in the sandbox updates them, so they stay as made."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client

CLIQUE_LABEL = "nvidia.com/gpu.clique"
BLOCK_LABEL = "cloud.google.com/gce-topology-block"
HOST_LABEL = "kubernetes.io/hostname"
GPU = "nvidia.com/gpu"


@dataclass(frozen=True, slots=True)
class Shape:
    """blocks x domains (NVLink cliques) per block x nodes per domain, GPUs per node."""

    nodes: int = 8
    gpus_per_node: int = 8
    nodes_per_domain: int = 4
    domains_per_block: int = 2
    product: str = "NVIDIA-H100-80GB-HBM3"
    taint_gpus: bool = True


def node_manifest(name: str, gpus: int, labels: dict[str, str], product: str,
                  taint: bool) -> dict[str, Any]:
    resources = {"cpu": "96", "memory": "1024Gi", "pods": "110", GPU: str(gpus)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {
            HOST_LABEL: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "nvidia.com/gpu.product": product, "nvidia.com/gpu.count": str(gpus), **labels}},
        "spec": {"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
                 if taint else []},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                            "message": "fake node: no kubelet"}],
        },
    }


def topology(shape: Shape, prefix: str = "gpu") -> list[dict[str, Any]]:
    nodes = []
    for i in range(shape.nodes):
        domain = i // shape.nodes_per_domain
        block = domain // shape.domains_per_block
        labels = {CLIQUE_LABEL: f"clique-{domain}", BLOCK_LABEL: f"block-{block}"}
        nodes.append(node_manifest(f"{prefix}-{i:04d}", shape.gpus_per_node, labels,
                                   shape.product, shape.taint_gpus))
    return nodes


async def create_nodes(api: client.ApiClient, nodes: list[dict[str, Any]],
                       concurrency: int = 16) -> None:
    core = client.CoreV1Api(api)
    limit = asyncio.Semaphore(concurrency)

    async def one(node: dict[str, Any]) -> None:
        async with limit:
            await core.create_node(body=node)
            # Status is a subresource: the create above ignores it.
            name = node["metadata"]["name"]
            await core.patch_node_status(name, body={"status": node["status"]},
                                         _content_type="application/merge-patch+json")
            # The TaintNodesByCondition plugin taints every new node not-ready; only the
            # node lifecycle controller (not run here) would lift it once Ready.
            await core.patch_node(name, body={"spec": {"taints": node["spec"]["taints"]}},
                                  _content_type="application/merge-patch+json")

    await asyncio.gather(*(one(n) for n in nodes))
