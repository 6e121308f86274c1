"""`airlock sandbox up --dra`: the fake nodes' GPUs only as DRA devices. The real
kube-controller-manager makes each pod's ResourceClaim from its template, the real
kube-scheduler's DRA plugin allocates it from the nodes' ResourceSlices, KWOK runs the
pod. Nothing here allocates: the tests read what the control plane decided."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import dra_pod
from tests.kube import (
    DRA_NODES,
    GPUS_PER_NODE,
    allocated,
    claims_of,
    create_template,
    fresh_namespaces,
    read_pod,
    until,
)
from webhook.devices.kinds import PCIE_ROOT
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.sandbox.devices import (
    CHANNEL_CLASS,
    CHANNEL_DRIVER,
    GPU_CLASS,
    GPU_DRIVER,
    MIG_CLASS,
    NIC_CLASS,
    NIC_DRIVER,
)
from webhook.sandbox.nodes import CLIQUE_LABEL, GPU

NODES = DRA_NODES.nodes


@pytest.fixture
async def ns(dra_api: client.ApiClient) -> AsyncIterator[str]:
    """A fresh namespace of the DRA sandbox that Airlock leaves alone: these tests are of
    the sandbox's devices and the real scheduler's allocation. Its pods go at once
    afterwards, so their claims free the devices for the next test."""
    async with fresh_namespaces(dra_api, "e2e-dra") as make:
        yield await make({IGNORE_NAMESPACE_LABEL: "true"})


async def items(listing: Any) -> list[dict[str, Any]]:
    """The items of a list call made with `_preload_content=False`."""
    found: list[dict[str, Any]] = (await (await listing).json())["items"]
    return found


async def create_pod(api: client.ApiClient, ns: str, name: str, template: str) -> None:
    await client.CoreV1Api(api).create_namespaced_pod(ns, dra_pod(name, template))


async def running(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    """The pod, once KWOK runs it on the node kube-scheduler bound it to."""
    async def check() -> bool:
        pod = await read_pod(api, ns, name)
        return (pod.get("status") or {}).get("phase") == "Running"
    await until(check, within=60)
    return await read_pod(api, ns, name)


async def test_nodes_offer_their_gpus_only_as_dra_devices(dra_api: client.ApiClient) -> None:
    resource = client.ResourceV1Api(dra_api)
    nodes = await items(client.CoreV1Api(dra_api).list_node(_preload_content=False))
    assert len(nodes) == NODES
    for node in nodes:
        assert GPU not in node["status"]["allocatable"], node["status"]["allocatable"]
        assert GPU not in node["status"]["capacity"]
        assert node["metadata"]["labels"][CLIQUE_LABEL].startswith("clique-")
        assert {"key": GPU, "value": "present", "effect": "NoSchedule"} in \
            node["spec"]["taints"]
    slices = await items(resource.list_resource_slice(_preload_content=False))
    by_driver = {(s["spec"]["driver"], s["spec"]["nodeName"]): s for s in slices}
    assert len(slices) == len(by_driver) == 3 * NODES
    for node in (n["metadata"]["name"] for n in nodes):
        gpus = by_driver[(GPU_DRIVER, node)]["spec"]
        assert gpus["pool"] == {"name": node, "generation": 1, "resourceSliceCount": 1}
        assert [d["name"] for d in gpus["devices"]] == [f"gpu-{i}" for i in range(8)]
        device = gpus["devices"][0]
        assert device["attributes"]["type"] == {"string": "gpu"}
        assert device["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
        assert device["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
        assert device["capacity"]["memory"] == {"value": "80Gi"}
        uuids = {d["attributes"]["uuid"]["string"] for d in gpus["devices"]}
        assert len(uuids) == GPUS_PER_NODE
        channels = by_driver[(CHANNEL_DRIVER, node)]["spec"]["devices"]
        assert channels == [{"name": "channel-0", "attributes": {
            "type": {"string": "channel"}, "id": {"int": 0}}}]
        # A NIC beside each GPU, under its PCIe root.
        nics = by_driver[(NIC_DRIVER, node)]["spec"]["devices"]
        assert [n["attributes"][PCIE_ROOT] for n in nics] == [
            g["attributes"][PCIE_ROOT] for g in gpus["devices"]]
    classes = await items(resource.list_device_class(_preload_content=False))
    assert {c["metadata"]["name"] for c in classes} == {GPU_CLASS, MIG_CLASS, CHANNEL_CLASS,
                                                        NIC_CLASS}


async def test_eight_gpus_come_from_one_node_and_eight_more_from_another(
        dra_api: client.ApiClient, ns: str) -> None:
    await create_template(dra_api, ns, "eight-gpus", GPU_CLASS, GPUS_PER_NODE)
    nodes = []
    for name in ("first", "second"):
        await create_pod(dra_api, ns, name, "eight-gpus")
        pod = await running(dra_api, ns, name)
        results = allocated((await claims_of(dra_api, ns, pod))[0], pod)
        node = pod["spec"]["nodeName"]
        # One node's eight GPUs, each once, from its own pool.
        assert {(r["driver"], r["pool"]) for r in results} == {(GPU_DRIVER, node)}
        assert sorted(r["device"] for r in results) == [f"gpu-{i}" for i in range(8)]
        nodes.append(node)
    assert nodes[0] != nodes[1]


async def test_a_claim_no_node_can_satisfy_leaves_the_pod_unschedulable(
        dra_api: client.ApiClient, ns: str) -> None:
    """Nine GPUs of one class: every node has eight, so the DRA plugin finds no node."""
    await create_template(dra_api, ns, "nine-gpus", GPU_CLASS, GPUS_PER_NODE + 1)
    await create_pod(dra_api, ns, "too-big", "nine-gpus")

    async def unschedulable() -> bool:
        pod = await read_pod(dra_api, ns, "too-big")
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in (pod.get("status") or {}).get("conditions") or [])

    await until(unschedulable, within=60)
    pod = await read_pod(dra_api, ns, "too-big")
    assert not pod["spec"].get("nodeName")
    (claim,) = await claims_of(dra_api, ns, pod)
    assert not (claim.get("status") or {}).get("allocation")


async def test_a_pod_claims_a_compute_domain_channel(dra_api: client.ApiClient,
                                                     ns: str) -> None:
    await create_template(dra_api, ns, "imex-channel", CHANNEL_CLASS, 1)
    await create_pod(dra_api, ns, "imex", "imex-channel")
    pod = await running(dra_api, ns, "imex")
    results = allocated((await claims_of(dra_api, ns, pod))[0], pod)
    assert [(r["driver"], r["pool"], r["device"]) for r in results] == [
        (CHANNEL_DRIVER, pod["spec"]["nodeName"], "channel-0")]
