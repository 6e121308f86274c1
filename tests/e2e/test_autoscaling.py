"""Gangs that grow the cluster, on the Karpenter sandbox: 2 static GPU nodes, and the real
Karpenter (kwok provider) launching 8-GPU nodes for Unschedulable pods. A gang that fits
no domain asks for room with placeholder pods; Karpenter adds nodes for them; Airlock lifts
the gang whole into the new nodes and removes the placeholders; once the work ends the
nodes are consolidated away. A gang its queue may not admit asks for nothing, and a
controller killed while a request is open leaves no placeholder behind."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import GPU, policy_yaml
from tests.commands import airlock_command
from tests.kube import (
    KARPENTER_STATIC,
    Controllers,
    PolicyFileFactory,
    WiredPlane,
    create_gang,
    events,
    fresh_namespaces,
    gated,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.keys import PLACEHOLDER_LABEL, PLACEMENT_ANNOTATION, SYSTEM_NAMESPACE
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.nodes import CLIQUE_LABEL

PLACEHOLDERS = policy_yaml("capacity", {"capacity": {"mode": "placeholders",
                                                     "timeout": "5m", "backoff": "1m"}})


@pytest.fixture
async def grow_api(karpenter_plane: WiredPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(karpenter_plane.plane.admin_kubeconfig) as api_client:
        yield api_client


@pytest.fixture
def grow_controllers(karpenter_plane: WiredPlane, tmp_path: Path, session_policies: Path
                     ) -> Iterator[Controllers]:
    with karpenter_plane.controllers(tmp_path, session_policies) as running:
        yield running


@pytest.fixture
async def ns(grow_api: client.ApiClient) -> AsyncIterator[str]:
    async with fresh_namespaces(grow_api) as make:
        yield await make()


async def node_claims(api: client.ApiClient) -> list[dict[str, Any]]:
    found = await client.CustomObjectsApi(api).list_cluster_custom_object(
        "karpenter.sh", "v1", "nodeclaims")
    items: list[dict[str, Any]] = found["items"]
    return items


async def placeholders(api: client.ApiClient) -> list[dict[str, Any]]:
    response = await client.CoreV1Api(api).list_namespaced_pod(
        SYSTEM_NAMESPACE, label_selector=PLACEHOLDER_LABEL, _preload_content=False)
    items: list[dict[str, Any]] = (await response.json())["items"]
    return items


async def test_a_gang_too_big_for_the_nodes_grows_the_cluster_and_runs_whole(
        grow_api: client.ApiClient, ns: str, grow_controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    policy_file("92-capacity.yaml", PLACEHOLDERS)
    grow_controllers.start()
    # 4 x 8 GPUs, one NVLink domain preferred: the 2 static nodes hold 16.
    await create_gang(grow_api, ns, "big", 4, cls="training")
    unrecorded: list[int] = []

    async def running_whole() -> bool:
        # A lift is one patch per pod, so a poll may land between two of them; what must
        # hold is that no gate is lifted before the record of a decision for all four.
        pods = await pods_of(grow_api, ns, "big-")
        lifted = sum(not gated(p) for p in pods)
        records = [json.loads(p["metadata"]["annotations"][PLACEMENT_ANNOTATION])
                   for p in pods if PLACEMENT_ANNOTATION in p["metadata"].get("annotations", {})]
        if lifted and not any(len(r["members"]) == 4 for r in records):
            unrecorded.append(lifted)
        return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

    await until(running_whole, within=180)
    assert not unrecorded, f"{unrecorded} of 4 pods lifted without a decision for the gang"
    told = await events(grow_api, ns, "big-")
    assert "CapacityRequested: asked the cluster's autoscaler for the room the gang's 4 " \
        "pods lack, with a placeholder pod for each" in told
    # Into the nodes Karpenter launched, one domain of their own; its placeholders gone.
    domains = await nodes_by_name(grow_api)
    landed = {domains[p["spec"]["nodeName"]][CLIQUE_LABEL]
              for p in await pods_of(grow_api, ns, "big-")}
    assert landed == {"karpenter-clique-0"}
    launched = await node_claims(grow_api)
    assert len(launched) == 4

    async def no_placeholders() -> bool:
        return not await placeholders(grow_api)

    await until(no_placeholders, within=30)

    # The work ends: the nodes Karpenter added are consolidated away, nothing left
    # Pending.
    await client.CoreV1Api(grow_api).delete_collection_namespaced_pod(
        ns, grace_period_seconds=0)

    async def consolidated() -> bool:
        return not await node_claims(grow_api) and \
            len(await nodes_by_name(grow_api)) == KARPENTER_STATIC.nodes

    await until(consolidated, within=180)
    assert await pods_of(grow_api, ns) == []
    assert await placeholders(grow_api) == []


async def test_a_gang_its_queue_may_not_admit_adds_no_node(
        grow_api: client.ApiClient, ns: str, grow_controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    policy_file("92-capacity.yaml", PLACEHOLDERS)
    policy_file("93-queues.yaml", policy_yaml("capped", {"queues": [
        {"name": "capped", "namespaces": [ns], "nominal": {GPU: 16},
         "borrowingLimit": {GPU: 0}}]}))
    grow_controllers.start()
    launched = len(await node_claims(grow_api))
    await create_gang(grow_api, ns, "over", 4, cls="training")

    async def told() -> bool:
        # Told why it waits (it fits no node today); the first test's gang, the same
        # but for its queue, grew the cluster.
        return any(m.startswith("Waiting: 4/4 pods present")
                   for m in await events(grow_api, ns, "over-"))

    await until(told, within=30)
    # Rounds and Karpenter's batching window (10 s at most) go by: nothing is asked for.
    await asyncio.sleep(15)
    assert await placeholders(grow_api) == []
    assert len(await node_claims(grow_api)) == launched
    assert all(gated(p) for p in await pods_of(grow_api, ns, "over-"))


async def test_a_controller_killed_with_a_request_open_leaves_no_placeholder(
        grow_api: client.ApiClient, ns: str, grow_controllers: Controllers,
        policy_file: PolicyFileFactory, karpenter_plane: WiredPlane,
        session_policies: Path) -> None:
    """A gang of 9 x 8 GPUs: more than the NodePool may launch (64 GPUs), so its request
    stays open. The controller dies; the gang is deleted meanwhile; the next one's first
    round removes the placeholders."""
    policy_file("92-capacity.yaml", PLACEHOLDERS)
    first = grow_controllers.start()
    await create_gang(grow_api, ns, "huge", 9, cls="training")

    async def asked() -> bool:
        return len(await placeholders(grow_api)) == 9

    await until(asked, within=30)
    # `airlock status` shows the request, as a person would run it.
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig",
                         str(karpenter_plane.plane.admin_kubeconfig),
                         "--policies", str(session_policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    (request,) = json.loads(out)["capacityRequests"]
    assert (request["gang"], request["mode"], request["pods"], request["gpus"],
            request["state"]) == (f"{ns}/huge", "placeholders", 9, 72, "open")
    first.process.kill()
    first.process.wait()
    await client.CoreV1Api(grow_api).delete_collection_namespaced_pod(
        ns, grace_period_seconds=0)
    grow_controllers.start()

    async def cleaned() -> bool:
        return not await placeholders(grow_api)

    await until(cleaned, within=30)
