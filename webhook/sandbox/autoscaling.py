"""The sandbox's autoscaler (`sandbox up --autoscaler karpenter`): the real Karpenter,
its kwok provider, deciding what to launch and what to consolidate; a NodePool of the
8-GPU instance type (operators.GPU_INSTANCE_TYPE) whose nodes carry the sandbox's GPU
taint, product labels and topology labels (all in one NVLink domain of their own), and
the KWOKNodeClass it names. The nodes it launches are KWOK's, as the static ones are."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.certificates import Authority
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.gobuilding import Progress
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, GPU, Shape
from webhook.sandbox.operating import RunningCommand, start_operators
from webhook.sandbox.operators import GPU_INSTANCE_TYPE, KARPENTER

NODE_POOL = "gpu"
# The domain every node Karpenter launches is in: one NVLink domain and block of its own.
CLIQUE = "karpenter-clique-0"


def karpenter_objects(shape: Shape, gpu_limit: int = 64,
                      consolidate_after: str = "10s") -> list[dict[str, Any]]:
    """The NodePool and its KWOKNodeClass: up to `gpu_limit` GPUs launched, empty or
    underused nodes consolidated after `consolidate_after`."""
    labels = {CLIQUE_LABEL: CLIQUE, BLOCK_LABEL: "karpenter-block-0",
              "nvidia.com/gpu.product": shape.product,
              "nvidia.com/gpu.count": str(shape.gpus_per_node)}
    pool = {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": NODE_POOL},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In",
                         "values": [GPU_INSTANCE_TYPE]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": ["on-demand"]}],
                    "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": "default"},
                    "expireAfter": "Never"}},
            "limits": {GPU: str(gpu_limit)},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": consolidate_after}}}
    node_class = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                  "metadata": {"name": "default"}}
    return [node_class, pool]


async def apply_karpenter_objects(api: client.ApiClient,
                                  objects: list[dict[str, Any]]) -> None:
    custom = client.CustomObjectsApi(api)
    for obj in objects:
        group, version = obj["apiVersion"].split("/")
        plural = f"{obj['kind'].lower()}es" if obj["kind"].endswith("Class") \
            else f"{obj['kind'].lower()}s"
        try:
            await custom.create_cluster_custom_object(group, version, plural, obj)
        except ApiException as e:
            if e.status != 409:
                raise


def start_karpenter(workdir: Path, kubeconfig: Path, ca: Authority, shape: Shape,
                    progress: Progress, detached: bool = False) -> list[RunningCommand]:
    """Karpenter started against the plane, and what it may launch applied."""
    running = start_operators([KARPENTER], workdir, kubeconfig, ca, progress, detached)

    async def apply() -> None:
        async with await from_kubeconfig(kubeconfig) as api:
            await apply_karpenter_objects(api, karpenter_objects(shape))

    asyncio.run(apply())
    return running
