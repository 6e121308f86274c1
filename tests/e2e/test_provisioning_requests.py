"""Capacity requests as ProvisioningRequests (`capacity.mode: provisioningRequest`), on the
shared control plane with the cluster-autoscaler's CRD (autoscaling.x-k8s.io, from its
published API module). No cluster-autoscaler runs here (the module proxy serves none):
the tests write the request's conditions as it would, and add the nodes it would add.
A gang of 9 x 8 GPUs fits none of the 64 GPUs, so it asks."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import policy_yaml
from tests.commands import airlock_command
from tests.kube import (
    Controllers,
    NodeFactory,
    PolicyFileFactory,
    create_gang,
    events,
    gated,
    pods_of,
    until,
)
from webhook.operators.clusterautoscaler.keys import (
    CLASS_ANNOTATION,
    CONSUME_ANNOTATION,
    GROUP,
    PLURAL,
    VERSION,
)
from webhook.sandbox.autoscaling import install_provisioning_requests
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import Shape, topology

CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
pytestmark = pytest.mark.usefixtures("airlock", "started")


def asking(timeout: str = "1h", backoff: str = "1h") -> str:
    return policy_yaml("capacity", {"capacity": {
        "mode": "provisioningRequest", "provisioningClass": CLASS, "timeout": timeout,
        "backoff": backoff}})


@pytest.fixture
async def started(api: client.ApiClient, controllers: Controllers) -> Controllers:
    """The CRD served, then the controller (which looks for it at its start)."""
    await install_provisioning_requests(api)
    controllers.start()
    return controllers


async def requests(api: client.ApiClient, ns: str) -> list[dict[str, Any]]:
    found = await client.CustomObjectsApi(api).list_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL)
    items: list[dict[str, Any]] = found["items"]
    return items


async def asked(api: client.ApiClient, ns: str) -> dict[str, Any]:
    """The one request the gang made, once there."""
    async def one() -> bool:
        return len(await requests(api, ns)) == 1

    await until(one, within=30)
    (request,) = await requests(api, ns)
    return request


async def say(api: client.ApiClient, ns: str, request: dict[str, Any], condition: str,
              message: str) -> None:
    """The request's condition, as the cluster-autoscaler writes it."""
    body = {"status": {"conditions": [{
        "type": condition, "status": "True", "reason": condition, "message": message,
        "lastTransitionTime": "2026-11-25T00:00:00Z", "observedGeneration": 1}]}}
    await client.CustomObjectsApi(api).patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, PLURAL, request["metadata"]["name"], body,
        _content_type="application/merge-patch+json")


async def templates(api: client.ApiClient, ns: str) -> list[str]:
    listed = await client.CoreV1Api(api).list_namespaced_pod_template(ns)
    return [t.metadata.name for t in listed.items]


async def told(api: client.ApiClient, ns: str, start: str) -> bool:
    return any(m.startswith(start) for m in await events(api, ns, "big-"))


async def test_a_gang_asks_and_a_failed_request_is_removed_and_not_retried_at_once(
        api: client.ApiClient, namespace: str, policy_file: PolicyFileFactory,
        control_plane: ControlPlane, session_policies: Path) -> None:
    policy_file("92-capacity.yaml", asking())
    await create_gang(api, namespace, "big", 9, cls="training")
    request = await asked(api, namespace)
    spec = request["spec"]
    assert spec["provisioningClassName"] == CLASS
    (pod_set,) = spec["podSets"]
    assert pod_set["count"] == 9
    (template,) = await templates(api, namespace)
    assert pod_set["podTemplateRef"]["name"] == template
    made = await client.CoreV1Api(api).read_namespaced_pod_template(template, namespace)
    (container,) = made.template.spec.containers
    assert container.resources.requests["nvidia.com/gpu"] == "8"
    await until(lambda: told(api, namespace, "CapacityRequested: asked the cluster's "
                             "autoscaler for the room the gang's 9 pods lack, with a "
                             "ProvisioningRequest"))
    # `airlock status` shows it, as a person would run it.
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(control_plane.admin_kubeconfig),
                         "--policies", str(session_policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    (line,) = [c for c in json.loads(out)["capacityRequests"]
               if c["gang"] == f"{namespace}/big"]
    assert (line["mode"], line["pods"], line["gpus"], line["state"]) == (
        "provisioningRequest", 9, 72, "open")

    await say(api, namespace, request, "Failed", "no node group can fit the pods")
    await until(lambda: told(api, namespace, "CapacityFailed: the autoscaler gave up "
                                             "(Failed: no node group can fit the pods)"))

    async def removed() -> bool:
        return not await requests(api, namespace) and not await templates(api, namespace)

    await until(removed, within=30)
    await asyncio.sleep(3)  # rounds go by: the backoff (1h) holds the next request
    assert await requests(api, namespace) == []
    assert all(gated(p) for p in await pods_of(api, namespace, "big-"))


async def test_a_request_that_brings_no_room_in_time_expires(
        api: client.ApiClient, namespace: str,
        policy_file: PolicyFileFactory) -> None:
    policy_file("92-capacity.yaml", asking(timeout="3s"))
    await create_gang(api, namespace, "big", 9, cls="training")
    await asked(api, namespace)
    await until(lambda: told(api, namespace, "CapacityExpired: no room came within 3s"))

    async def removed() -> bool:
        return not await requests(api, namespace)

    await until(removed, within=30)


async def test_provisioned_room_takes_the_gang_whole_and_its_pods_consume_the_booking(
        api: client.ApiClient, namespace: str,
        policy_file: PolicyFileFactory, extra_nodes: NodeFactory) -> None:
    policy_file("92-capacity.yaml", asking())
    await create_gang(api, namespace, "big", 9, cls="training")
    request = await asked(api, namespace)
    # What the cluster-autoscaler does: says the room is provisioned, and it comes.
    # Provisioned alone lifts nothing: the gang does not fit yet.
    await say(api, namespace, request, "Provisioned", "capacity is available")
    await asyncio.sleep(2)
    assert all(gated(p) for p in await pods_of(api, namespace, "big-"))
    await extra_nodes(topology(Shape(nodes=2, nodes_per_domain=2), prefix="grown"))

    async def lifted() -> bool:
        pods = await pods_of(api, namespace, "big-")
        return len(pods) == 9 and not any(gated(p) for p in pods)

    await until(lifted, within=60)
    name = request["metadata"]["name"]
    for pod in await pods_of(api, namespace, "big-"):
        notes = pod["metadata"]["annotations"]
        assert (notes[CONSUME_ANNOTATION], notes[CLASS_ANNOTATION]) == (name, CLASS)
    assert await told(api, namespace, "CapacityProvisioned")

    async def done() -> bool:
        return not await requests(api, namespace)

    # Removed once the gang no longer asks: the round after its lift.
    await until(done, within=30)
    with pytest.raises(ApiException) as gone:
        await client.CustomObjectsApi(api).get_namespaced_custom_object(
            GROUP, VERSION, namespace, PLURAL, name)
    assert gone.value.status == 404
