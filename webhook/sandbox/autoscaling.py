"""The sandbox's autoscaler (`sandbox up --autoscaler karpenter`): the real Karpenter,
its kwok provider, deciding what to launch and what to consolidate; a NodePool of the
8-GPU instance type (operators.GPU_INSTANCE_TYPE) whose nodes carry the sandbox's GPU
taint, product labels and topology labels (all in one NVLink domain of their own), and
the KWOKNodeClass it names. The nodes it launches are KWOK's, as the static ones are."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.certificates import Authority
from webhook.operators.clusterautoscaler.keys import GROUP, PLURAL, VERSION
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.gobuilding import GoModule, Progress, cache_root
from webhook.sandbox.manifests import module_source
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, GPU, Shape
from webhook.sandbox.operating import RunningCommand, install_crds, start_operators
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
