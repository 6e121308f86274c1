"""Kubernetes' own gangs (workload-aware scheduling, scheduling.k8s.io/v1beta1) on a 1.37
control plane with the GenericWorkload gate on: pods naming a PodGroup in
`spec.schedulingGroup` are one gang of the group's `minCount`. Airlock's webhook gates
them, its controller lifts the gang whole into one NVLink domain once all are there, and
the scheduler's own gang plugin binds them."""

from __future__ import annotations

import functools
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import pod
from tests.kube import (
    Controllers,
    WiredPlane,
    all_bound,
    events,
    gated,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.keys import CLASS_LABEL, GANG_LABEL, GANG_SOURCE_ANNOTATION
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.nodes import CLIQUE_LABEL


@pytest.fixture
async def gang_api(gang_plane: WiredPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(gang_plane.plane.admin_kubeconfig) as api_client:
        yield api_client


@pytest.fixture
def gang_controllers(gang_plane: WiredPlane, tmp_path: Path, session_policies: Path
                     ) -> Iterator[Controllers]:
    with gang_plane.controllers(tmp_path, session_policies) as running:
        yield running


async def create_group(api: client.ApiClient, ns: str, name: str, min_count: int,
                       priority_class: str | None = "airlock-training") -> None:
    """A gang PodGroup; kube-scheduler holds it to its pods' priority, so by default it
    has that of Airlock's training class, which its pods get."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if priority_class:
        spec["priorityClassName"] = priority_class
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        "scheduling.k8s.io", "v1beta1", ns, "podgroups",
        {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
         "metadata": {"name": name}, "spec": spec})


async def create_member(api: client.ApiClient, ns: str, group: str, i: int) -> None:
    """A bare pod of the group, 8 GPUs, as a user (or a 1.37 Job) writes it."""
    obj = pod(f"{group}-{i}").gpus(8).set("schedulingGroup", {"podGroupName": group}).build()
    del obj["metadata"]["namespace"]
    await client.CoreV1Api(api).create_namespaced_pod(ns, body=obj)


async def test_a_podgroups_pods_wait_whole_then_land_in_one_domain(
        gang_api: client.ApiClient, gang_controllers: Controllers) -> None:
    ns = f"e2e-{uuid.uuid4().hex[:8]}"
    await wiring.create_namespace(gang_api, ns)
    await create_group(gang_api, ns, "ddp", 4)
    for i in range(3):
        await create_member(gang_api, ns, "ddp", i)
    for p in await pods_of(gang_api, ns, "ddp-"):
        assert gated(p)
        assert p["metadata"]["labels"][CLASS_LABEL] == "training"
        assert p["metadata"]["labels"][GANG_LABEL] == "ddp"
        assert p["metadata"]["annotations"][GANG_SOURCE_ANNOTATION] == "scheduling-group"
    gang_controllers.start()

    async def told() -> bool:
        # The size came from the PodGroup: 3 of its 4 are there.
        return any(m.startswith("Waiting: 3/4 pods present")
                   for m in await events(gang_api, ns, "ddp-"))

    await until(told, within=30)
    assert all(gated(p) for p in await pods_of(gang_api, ns, "ddp-"))
    await create_member(gang_api, ns, "ddp", 3)
    await until(functools.partial(all_bound, gang_api, ns, "ddp-", 4), within=60)
    domains = await nodes_by_name(gang_api)
    landed = await pods_of(gang_api, ns, "ddp-")
    assert len({domains[p["spec"]["nodeName"]][CLIQUE_LABEL] for p in landed}) == 1
    assert all(p["spec"]["schedulingGroup"] == {"podGroupName": "ddp"} for p in landed)


async def test_a_podgroup_of_another_priority_than_its_pods_waits_and_says_why(
        gang_api: client.ApiClient, gang_controllers: Controllers) -> None:
    """Lifted, such a gang would never bind (kube-scheduler refuses the group): it stays
    gated and its pods are told what to change."""
    ns = f"e2e-{uuid.uuid4().hex[:8]}"
    await wiring.create_namespace(gang_api, ns)
    await create_group(gang_api, ns, "odd", 2, priority_class=None)
    for i in range(2):
        await create_member(gang_api, ns, "odd", i)
    gang_controllers.start()
    why = ("the PodGroup's priority is 0 (priorityClassName none) and its pods' 50000: "
           "kube-scheduler binds no pod of such a group")

    async def told() -> bool:
        return any(why in m for m in await events(gang_api, ns, "odd-"))

    await until(told, within=30)
    assert all(gated(p) and not p["spec"].get("nodeName")
               for p in await pods_of(gang_api, ns, "odd-"))
