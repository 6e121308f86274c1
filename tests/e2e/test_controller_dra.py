"""Gangs whose GPUs are DRA devices, on the DRA sandbox (`airlock sandbox up --dra`): the
webhook classifies and gates the pods from their claims' templates, Airlock's controller
lifts each gang whole into one NVLink domain once its devices fit, queues charge DRA GPUs
to `nvidia.com/gpu` quotas, and preemption evicts whole DRA gangs. The real
kube-scheduler allocates every claim from the nodes' ResourceSlices; the tests read what
it allocated."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import GPU, gang_pod, policy_yaml
from tests.kube import (
    DRA_NODES,
    EIGHT,
    Controllers,
    PolicyFileFactory,
    WiredPlane,
    all_bound,
    allocated,
    claims_of,
    documents,
    events,
    gated,
    pods_of,
    until,
)
from tests.paths import WORKLOAD_EXAMPLES
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CLASS_LABEL,
    GANG_LABEL,
    GANG_NAME_LABEL,
    GANG_SOURCE_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)
from webhook.sandbox.devices import CHANNEL_DRIVER, GPU_DRIVER
from webhook.sandbox.nodes import CLIQUE_LABEL
from webhook.sandbox.operating import start_operators, stop
from webhook.sandbox.operators import TRAINING_OPERATOR, OperatorError

# Young pods may be preempted, and at once: the test cannot wait minutes.
PREEMPT_NOW = policy_yaml("preempt-now", {
    "preemption": {"minRuntime": "1s", "delay": "0", "requeueBackoff": "1m"}})


async def create_dra_gang(api: client.ApiClient, ns: str, gang: str, size: int,
                          templates: tuple[str, ...] = (EIGHT,), cls: str | None = None
                          ) -> None:
    core = client.CoreV1Api(api)
    await asyncio.gather(*(core.create_namespaced_pod(
        ns, body=gang_pod(gang, i, size, cls=cls, templates=templates))
        for i in range(size)))


async def nodes_of(api: client.ApiClient) -> dict[str, str]:
    """Each node's NVLink domain."""
    response = await client.CoreV1Api(api).list_node(_preload_content=False)
    return {n["metadata"]["name"]: n["metadata"]["labels"][CLIQUE_LABEL]
            for n in (await response.json())["items"]}


async def landed_whole(api: client.ApiClient, ns: str, gang: str, size: int,
                       driver: str = GPU_DRIVER) -> set[str]:
    """The domains the gang's pods run in, once all are bound; checked: every claim
    allocated by the scheduler to its own pod, from the pool of the node it runs on, each
    device once."""
    await until(functools.partial(all_bound, api, ns, f"{gang}-", size), within=90)
    domains = await nodes_of(api)
    seen: set[tuple[str, str]] = set()
    for pod in await pods_of(api, ns, f"{gang}-"):
        node = pod["spec"]["nodeName"]
        assert not gated(pod)
        for claim in await claims_of(api, ns, pod):
            results = allocated(claim, pod)
            assert {r["pool"] for r in results} == {node}
            devices = {(r["pool"], r["device"]) for r in results if r["driver"] == driver}
            assert not devices & seen, "a device allocated twice"
            seen |= devices
    return {domains[p["spec"]["nodeName"]] for p in await pods_of(api, ns, f"{gang}-")}


async def test_a_dra_gang_is_gated_at_creation_then_runs_whole_in_one_nvlink_domain(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers) -> None:
    (ns,) = spaces
    await create_dra_gang(dra_api, ns, "train", 4)
    created = await pods_of(dra_api, ns, "train-")
    assert len(created) == 4
    for pod in created:
        # Classified and marked from its claim alone: no nvidia.com/gpu anywhere in it.
        assert gated(pod)
        assert pod["metadata"]["labels"][CLASS_LABEL] == "training"
        assert pod["spec"]["priorityClassName"] == "airlock-training"
        assert pod["metadata"]["annotations"][ACCELERATORS_ANNOTATION]
        assert any(t["key"] == GPU for t in pod["spec"]["tolerations"])
    await asyncio.sleep(2)
    assert not any(p["spec"].get("nodeName") for p in await pods_of(dra_api, ns, "train-"))

    dra_controllers.start()
    assert len(await landed_whole(dra_api, ns, "train", 4)) == 1
    assert any(m.startswith("Admitted:") for m in await events(dra_api, ns, "train-"))


@pytest.fixture(scope="module")
def training_operator(dra_sandbox: WiredPlane, tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[None]:
    """The real training-operator, running against the DRA sandbox."""
    plane = dra_sandbox.plane
    try:
        running = start_operators([TRAINING_OPERATOR], tmp_path_factory.mktemp("operators"),
                                  plane.admin_kubeconfig, plane.pki.ca, print)
    except OperatorError as e:
        pytest.fail(str(e))
    yield
    stop(running)


@pytest.mark.usefixtures("training_operator")
async def test_a_pytorchjob_claiming_gpus_runs_whole_in_one_nvlink_domain(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers) -> None:
    """examples/workloads/pytorchjob-dra.yaml as a user applies it: the training-operator
    makes the pods, each with a claim from the template."""
    (ns,) = spaces
    template, job = documents((WORKLOAD_EXAMPLES / "pytorchjob-dra.yaml").read_text())
    for obj in (template, job):
        obj["metadata"]["namespace"] = ns
    await client.ResourceV1Api(dra_api).create_namespaced_resource_claim_template(ns, template)
    await client.CustomObjectsApi(dra_api).create_namespaced_custom_object(
        "kubeflow.org", "v1", ns, "pytorchjobs", job)
    name = job["metadata"]["name"]

    async def made() -> bool:
        return len(await pods_of(dra_api, ns, f"{name}-")) == 4

    await until(made, within=60)
    for pod in await pods_of(dra_api, ns, f"{name}-"):
        # No controller runs yet: each is as the webhook left it.
        assert gated(pod)
        assert pod["metadata"]["labels"][CLASS_LABEL] == "training"
        assert pod["metadata"]["labels"][GANG_LABEL] == name
        assert pod["metadata"]["annotations"][GANG_SOURCE_ANNOTATION] == "kubeflow"
    dra_controllers.start()
    assert len(await landed_whole(dra_api, ns, name, 4)) == 1


async def test_a_128_gpu_dra_gang_waits_whole_while_32_gpus_are_taken(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers) -> None:
    (ns,) = spaces
    dra_controllers.start()
    await create_dra_gang(dra_api, ns, "taken", 4)
    await landed_whole(dra_api, ns, "taken", 4)
    whole = DRA_NODES.nodes  # pods of 8 GPUs: 128, the whole sandbox
    await create_dra_gang(dra_api, ns, "big", whole)

    async def told() -> bool:
        return any(m.startswith("Waiting:") for m in await events(dra_api, ns, "big-"))

    await until(told, within=30)
    await asyncio.sleep(3)  # rounds go by; nothing of it moves
    big = await pods_of(dra_api, ns, "big-")
    assert len(big) == whole
    assert all(gated(p) and not p["spec"].get("nodeName") for p in big)

    await client.CoreV1Api(dra_api).delete_collection_namespaced_pod(
        ns, label_selector=f"{GANG_NAME_LABEL}=taken", grace_period_seconds=0)
    # Both domains: 128 GPUs are the whole sandbox, and training prefers (not requires)
    # one NVLink domain.
    assert len(await landed_whole(dra_api, ns, "big", whole)) == 2


async def test_a_compute_domain_gang_must_share_one_nvlink_domain(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers) -> None:
    (ns,) = spaces
    await create_dra_gang(dra_api, ns, "imex", 2, templates=(EIGHT, "channel"))
    for pod in await pods_of(dra_api, ns, "imex-"):
        # The channel's class is a compute-domain channel in the shipped policy: the
        # training class's preferred domain becomes required.
        assert pod["metadata"]["annotations"][TOPOLOGY_MODE_ANNOTATION] == "required"
    dra_controllers.start()
    assert len(await landed_whole(dra_api, ns, "imex", 2, CHANNEL_DRIVER)) == 1


async def test_a_queue_charges_dra_gpus_to_its_nvidia_gpu_quota(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    (ns,) = spaces
    policy_file("91-queues.yaml", policy_yaml("e2e-dra-queues", {"queues": [
        {"name": "capped", "namespaces": [ns], "nominal": {GPU: 32},
         "borrowingLimit": {GPU: 0}}]}))
    dra_controllers.start()
    await create_dra_gang(dra_api, ns, "first", 4)
    await landed_whole(dra_api, ns, "first", 4)
    await create_dra_gang(dra_api, ns, "second", 2)
    why = "queue capped would use 48 GPUs: nominal 32, borrowing limit 0"

    async def told() -> bool:
        told = await events(dra_api, ns, "second-")
        return any(m.startswith("Waiting:") and why in m for m in told)

    await until(told, within=30)
    # The cluster has room for it: only the quota holds it.
    assert all(gated(p) for p in await pods_of(dra_api, ns, "second-"))
    await client.CoreV1Api(dra_api).delete_collection_namespaced_pod(
        ns, label_selector=f"{GANG_NAME_LABEL}=first", grace_period_seconds=0)
    await landed_whole(dra_api, ns, "second", 2)


async def _running_for_an_hour(api: client.ApiClient, pods: list[dict[str, Any]]) -> None:
    for pod in pods:
        await client.CoreV1Api(api).patch_namespaced_pod_status(
            pod["metadata"]["name"], pod["metadata"]["namespace"],
            body={"status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}})


async def test_a_training_dra_gang_evicts_one_whole_scavenger_dra_gang(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    (ns,) = spaces
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    dra_controllers.start()
    # Two scavenger gangs take all 128 GPUs.
    nodes: dict[str, set[str]] = {}
    for name in ("one", "two"):
        await create_dra_gang(dra_api, ns, name, 8, cls="scavenger")
        await landed_whole(dra_api, ns, name, 8)
        pods = await pods_of(dra_api, ns, f"{name}-")
        nodes[name] = {p["spec"]["nodeName"] for p in pods}
        await _running_for_an_hour(dra_api, pods)
    await create_dra_gang(dra_api, ns, "train", 8, cls="training")

    async def evicted() -> list[str]:
        return [name for name in ("one", "two")
                if all(p["metadata"].get("deletionTimestamp")
                       for p in await pods_of(dra_api, ns, f"{name}-"))]

    async def one_gang_evicted() -> bool:
        return len(await evicted()) == 1

    await until(one_gang_evicted, within=60)
    (victim,) = await evicted()
    # The victims' claims free their devices, and the preemptor gets them, whole.
    await landed_whole(dra_api, ns, "train", 8)
    assert {p["spec"]["nodeName"] for p in await pods_of(dra_api, ns, "train-")} == \
        nodes[victim]
    (kept,) = {"one", "two"} - {victim}
    left = await pods_of(dra_api, ns, f"{kept}-")
    assert len(left) == 8
    assert not any(p["metadata"].get("deletionTimestamp") for p in left)
    assert sum(m.startswith("Preempted: a gang of higher priority needs the room")
               for m in await events(dra_api, ns)) == 8
