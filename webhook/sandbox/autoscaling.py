"""The sandbox's autoscaler (`sandbox up --autoscaler karpenter`): the real Karpenter,
its kwok provider, deciding what to launch and what to consolidate; per node pool an
instance type of its size and a NodePool of it whose nodes carry the sandbox's GPU taint,
the pool's labels and, for a pool with NVLink, topology labels (all in one NVLink domain of
the pool's own); and the KWOKNodeClass they name. The nodes it launches are KWOK's, as
the static ones are."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.certificates import Authority
from webhook.operators.clusterautoscaler.keys import GROUP, PLURAL, VERSION
from webhook.pools import Pool
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.gobuilding import GoModule, Progress, cache_root
from webhook.sandbox.manifests import module_source
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, GPU, Shape
from webhook.sandbox.operating import RunningCommand, install_crds, start_operators
from webhook.sandbox.operators import KARPENTER


def instance_type(pool: Pool) -> str:
    """`gpu-8x-h100`: the pool's name, its GPUs a node, and its model where known."""
    return f"{pool.name}-{pool.gpus_per_node}x" + (f"-{pool.gpu.key}" if pool.gpu else "")


def instance_types(shape: Shape) -> str:
    """Karpenter's kwok provider's file (its format: kwok/cloudprovider/helpers.go): a
    machine of each pool's size, offered on demand in one zone."""
    return json.dumps([{
        "name": instance_type(pool), "architecture": "amd64", "operatingSystems": ["linux"],
        "resources": {"cpu": pool.cpu, "memory": pool.memory, "pods": "110",
                      GPU: str(pool.gpus_per_node), "ephemeral-storage": "1Ti"},
        "offerings": [{"Price": round(12.29 * pool.gpus_per_node, 2), "Available": True,
                       "Requirements": [
                           {"key": "karpenter.sh/capacity-type", "operator": "In",
                            "values": ["on-demand"]},
                           {"key": "topology.kubernetes.io/zone", "operator": "In",
                            "values": ["zone-a"]}]}]} for pool in shape.node_pools()])


def launches(shape: Shape) -> str:
    return ", ".join(f"NodePool {p.name} launches {instance_type(p)} nodes"
                     for p in shape.node_pools())


def karpenter_objects(shape: Shape, gpu_limit: int = 64,
                      consolidate_after: str = "10s") -> list[dict[str, Any]]:
    """A NodePool per pool and the KWOKNodeClass they name: up to `gpu_limit` GPUs
    launched a pool, empty or underused nodes consolidated after `consolidate_after`.
    The nodes a pool with NVLink launches share a domain and block of their own
    (`karpenter-clique-0` for the first such pool)."""
    node_class = {"apiVersion": "karpenter.kwok.sh/v1alpha1", "kind": "KWOKNodeClass",
                  "metadata": {"name": "default"}}
    linked = [p for p in shape.node_pools() if p.nodes_per_domain is not None]
    return [node_class, *(_node_pool(
        p, {CLIQUE_LABEL: f"karpenter-clique-{linked.index(p)}",
            BLOCK_LABEL: f"karpenter-block-{linked.index(p)}"} if p in linked else {},
        gpu_limit, consolidate_after) for p in shape.node_pools())]


def _node_pool(pool: Pool, topology: dict[str, str], gpu_limit: int,
               consolidate_after: str) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": pool.name},
        "spec": {
            "template": {
                "metadata": {"labels": pool.node_labels() | topology},
                "spec": {
                    "requirements": [
                        {"key": "node.kubernetes.io/instance-type", "operator": "In",
                         "values": [instance_type(pool)]},
                        {"key": "karpenter.sh/capacity-type", "operator": "In",
                         "values": ["on-demand"]}],
                    "taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}],
                    "nodeClassRef": {"group": "karpenter.kwok.sh", "kind": "KWOKNodeClass",
                                     "name": "default"},
                    "expireAfter": "Never"}},
            "limits": {GPU: str(gpu_limit)},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized",
                           "consolidateAfter": consolidate_after}}}


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
    karpenter = dataclasses.replace(KARPENTER, config=instance_types(shape))
    running = start_operators([karpenter], workdir, kubeconfig, ca, progress, detached)

    async def apply() -> None:
        async with await from_kubeconfig(kubeconfig) as api:
            await apply_karpenter_objects(api, karpenter_objects(shape))

    asyncio.run(apply())
    return running


# The cluster-autoscaler's API module, at the one version the module proxy serves here (a
# 2024 pseudo-version, the one Kueue v0.12 requires): its ProvisioningRequest CRD has
# v1beta1 only. No v1 CRD is to be had, so the sandbox serves that published schema as v1
# too (v1 stored): written from the published API, not taken from a v1 CRD.
PROVISIONING_API = GoModule("autoscaler-apis", "k8s.io/autoscaler/cluster-autoscaler/apis",
                            "v0.0.0-20240813092541-aec7b75bb683")
_PROVISIONING_CRD = "config/crd/autoscaling.x-k8s.io_provisioningrequests.yaml"


def provisioning_request_crd() -> dict[str, Any]:
    """The ProvisioningRequest CRD from the autoscaler's published API, served as v1."""
    source = module_source(PROVISIONING_API, "ProvisioningRequest CRD",
                           cache_root() / "autoscaler-apis")
    crd: dict[str, Any] = yaml.safe_load((source / _PROVISIONING_CRD).read_text())
    (published,) = crd["spec"]["versions"]
    crd["spec"]["versions"] = [{**published, "storage": False},
                               {**copy.deepcopy(published), "name": "v1", "storage": True}]
    return crd


async def install_provisioning_requests(api: client.ApiClient, within: float = 30.0) -> None:
    """The CRD, back once its requests can be listed: a CRD is in discovery a moment
    before its storage serves (429, "storage is (re)initializing")."""
    await install_crds(api, [provisioning_request_crd()])
    custom = client.CustomObjectsApi(api)
    deadline = asyncio.get_running_loop().time() + within
    while True:
        try:
            await custom.list_cluster_custom_object(GROUP, VERSION, PLURAL, limit=1)
            return
        except ApiException as e:
            if e.status != 429 or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(0.2)
