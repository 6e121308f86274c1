"""GPUs beside their RDMA NICs, on the DRA sandbox (`airlock sandbox up --dra`): each node
publishes 8 GPUs and 8 NICs (dranet's), two of each under each of 4 PCIe roots. The
webhook pairs a claim's GPUs with its NICs as the template is created, the real
kube-scheduler's DRA allocator puts each pair under one root, and Airlock's controller
admits a gang only where enough such pairs are free."""

from __future__ import annotations

import asyncio
import functools
import uuid
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.builders import gang_pod, workload
from tests.kube import (
    DRA_NODES,
    Controllers,
    WiredPlane,
    airlock_status,
    all_bound,
    allocated,
    claims_of,
    gated,
    pods_of,
    until,
)
from webhook.devices.kinds import PCIE_ROOT
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.sandbox.devices import GPU_CLASS, GPU_DRIVER, NIC_CLASS, NIC_DRIVER

PAIRS = "gpus-and-nics"


def _requests(gpus: int, nics: int, gpu_roots: tuple[str, ...] = (),
              nic_roots: tuple[str, ...] = ()) -> dict[str, Any]:
    """A template's spec as a user writes it: GPUs and NICs, optionally from some roots."""
    def request(name: str, device_class: str, count: int, roots: tuple[str, ...]
                ) -> dict[str, Any]:
        exactly: dict[str, Any] = {"deviceClassName": device_class, "count": count}
        if roots:
            exactly["selectors"] = [{"cel": {"expression": (
                f"device.attributes['resource.kubernetes.io'].pcieRoot in {list(roots)}")}}]
        return {"name": name, "exactly": exactly}
    return {"devices": {"requests": [request("gpu", GPU_CLASS, gpus, gpu_roots),
                                     request("nic", NIC_CLASS, nics, nic_roots)]}}


async def _template(api: client.ApiClient, ns: str, name: str, spec: dict[str, Any]
                    ) -> dict[str, Any]:
    """The template created, as the apiserver stored it (after the webhook)."""
    resource = client.ResourceV1Api(api)
    await resource.create_namespaced_resource_claim_template(ns, {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name}, "spec": {"spec": spec}})
    stored = await resource.read_namespaced_resource_claim_template(
        name, ns, _preload_content=False)
    found: dict[str, Any] = await stored.json()
    return found


async def _roots(api: client.ApiClient) -> dict[tuple[str, str, str], str]:
    """Each device's PCIe root, as the slices publish it."""
    listed = await client.ResourceV1Api(api).list_resource_slice(_preload_content=False)
    return {(s["spec"]["driver"], s["spec"]["pool"]["name"], d["name"]):
            d["attributes"][PCIE_ROOT]["string"]
            for s in (await listed.json())["items"] for d in s["spec"]["devices"]
            if PCIE_ROOT in d.get("attributes", {})}


async def _aligned(api: client.ApiClient, ns: str, prefix: str, pods: int) -> None:
    """Every pod's claim holds 4 GPUs and 4 NICs, each GPU under the root of its NIC."""
    roots = await _roots(api)
    found = await pods_of(api, ns, prefix)
    assert len(found) == pods
    for pod in found:
        (claim,) = await claims_of(api, ns, pod)
        results = allocated(claim, pod)
        assert sorted(r["driver"] for r in results) == [NIC_DRIVER] * 4 + [GPU_DRIVER] * 4
        root = {r["request"]: roots[(r["driver"], r["pool"], r["device"])] for r in results}
        assert all(root[f"gpu-{i}"] == root[f"nic-{i}"] for i in range(4)), root


async def test_a_jobs_pod_gets_each_gpu_beside_its_nic(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers) -> None:
    (ns,) = spaces
    stored = await _template(dra_api, ns, PAIRS, _requests(4, 4))
    # The webhook paired them: four requests of each, each GPU constrained with its NIC.
    assert stored["spec"]["spec"]["devices"]["constraints"] == [
        {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT} for i in range(4)]
    dra_controllers.start()
    job = workload("batch/v1", "Job", "aligned", ns, backoffLimit=0, template={"spec": {
        "restartPolicy": "Never",
        "containers": [{"name": "main", "image": "ghcr.io/acme/trainer:1.0",
                        "resources": {"claims": [{"name": "devices"}]}}],
        "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": PAIRS}]}})
    await client.BatchV1Api(dra_api).create_namespaced_job(ns, body=job)
    await until(functools.partial(all_bound, dra_api, ns, "aligned-", 1), within=90)
    await _aligned(dra_api, ns, "aligned-", 1)


async def _scatter(api: client.ApiClient, spaces: list[str]) -> str:
    """On every node, a pod Airlock does not govern (its namespace is ignored) holding the
    GPUs of the first two roots and the NICs of the last two: 4 GPUs and 4 NICs stay free
    on each node, none beside the other."""
    ns = f"e2e-scatter-{uuid.uuid4().hex[:8]}"
    await client.CoreV1Api(api).create_namespace({"metadata": {
        "name": ns, "labels": {IGNORE_NAMESPACE_LABEL: "true"}}})
    spaces.append(ns)
    await _template(api, ns, "scattered", _requests(
        4, 4, ("pci0000:10", "pci0000:20"), ("pci0000:30", "pci0000:40")))
    core = client.CoreV1Api(api)
    for i in range(DRA_NODES.nodes):
        await core.create_namespaced_pod(ns, body={
            "metadata": {"name": f"scattered-{i}"},
            "spec": {"tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "main", "image": "ghcr.io/acme/other:1.0",
                                     "resources": {"claims": [{"name": "devices"}]}}],
                     "resourceClaims": [{"name": "devices",
                                         "resourceClaimTemplateName": "scattered"}]}})
    await until(functools.partial(all_bound, api, ns, "scattered-", DRA_NODES.nodes),
                within=120)
    return ns


async def test_a_gang_waits_gated_where_only_unaligned_devices_are_free(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers,
        dra_sandbox: WiredPlane, session_policies: Path) -> None:
    (ns,) = spaces
    scattered = await _scatter(dra_api, spaces)
    await _template(dra_api, ns, PAIRS, _requests(4, 4))
    dra_controllers.start()
    core = client.CoreV1Api(dra_api)
    for i in range(2):
        await core.create_namespaced_pod(ns, body=gang_pod("pairs", i, 2, templates=(PAIRS,)))

    async def waiting() -> list[dict[str, Any]]:
        status = await airlock_status(dra_sandbox.plane.admin_kubeconfig, session_policies)
        return [g for g in status["waiting"] if g["gang"] == f"{ns}/pairs"]

    async def listed() -> bool:
        return bool(await waiting())

    await until(listed, within=60)
    await asyncio.sleep(3)  # rounds go by; it stays
    (line,) = await waiting()
    # Why: no node has 4 free GPUs each beside a free NIC.
    assert line["reason"] == "NeverFits"
    assert f"{NIC_CLASS}+{GPU_CLASS}@{PCIE_ROOT} 4 (the most any has: 0)" in line["why"]
    # 4 GPUs and 4 NICs are free on every node, yet the gang stays gated, unbound.
    assert all(gated(p) and not p["spec"].get("nodeName")
               for p in await pods_of(dra_api, ns, "pairs-"))

    await core.delete_collection_namespaced_pod(scattered, grace_period_seconds=0)
    await until(functools.partial(all_bound, dra_api, ns, "pairs-", 2), within=120)
    await _aligned(dra_api, ns, "pairs-", 2)
