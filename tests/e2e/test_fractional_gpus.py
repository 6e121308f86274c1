"""A notebook that asks for 10Gi of GPU memory, end to end: a policy file offers MIG
slices, the real apiserver sends the pod to the webhook, which swaps its whole GPU for a
1g.10gb slice, and the real kube-scheduler places it on a MIG node (mixed strategy, as the
sandbox makes them). A gang of slices goes through the controller, which counts each
slice as 1/7 of a GPU; an ask no slice holds is denied by the apiserver with the webhook's
message."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import MIXED, pod, policy_yaml
from tests.kube import (
    Controllers,
    NodeFactory,
    PolicyFileFactory,
    dry_run,
    events,
    gated,
    pods_of,
    until,
)
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CLASS_LABEL,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
)
from webhook.sandbox.nodes import mig_node, mig_profiles

MIG_1G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"
MIG_NODE = "mig-e2e-0000"
OFFERS = policy_yaml("mig", {"gpuSlices": {"mig": [
    {"resource": MIG_1G, "memory": "10Gi", "share": "1/7", "nodeSelector": MIXED},
    {"resource": MIG_3G, "memory": "40Gi", "share": "3/7", "nodeSelector": MIXED},
]}})


def notebook(name: str, gpu_memory: str) -> dict[str, Any]:
    obj = (pod(name).gpus(1).cpu("2", "8Gi").label(CLASS_LABEL, "inference")
           .label("notebook-name", name).annotation(GPU_MEMORY_ANNOTATION, gpu_memory)
           .image("quay.io/jupyter/pytorch-notebook:cuda12-2024-11-19").build())
    del obj["metadata"]["namespace"]  # the request's namespace decides
    return obj


def slice_member(i: int) -> dict[str, Any]:
    obj = (pod(f"sweep-{i}").gpus(1).label(GANG_NAME_LABEL, "sweep")
           .annotation(GANG_SIZE_ANNOTATION, "2").annotation(GPU_FRACTION_ANNOTATION, "0.1")
           .build())
    del obj["metadata"]["namespace"]
    return obj


@pytest.mark.usefixtures("airlock")
async def test_a_notebook_asking_for_10gi_gets_a_mig_slice_and_lands_on_a_mig_node(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory, extra_nodes: NodeFactory,
        grant_inference: Callable[[str], None]) -> None:
    core = client.CoreV1Api(api)
    policy_file("50-mig.yaml", OFFERS)
    grant_inference(namespace)  # a notebook asks for inference itself

    async def mapped() -> bool:
        # Denied until the webhook has the offers: the policy offers no slice yet.
        stored = await dry_run(api, namespace, notebook("probe", "10Gi"))
        return "spec" in stored and \
            MIG_1G in stored["spec"]["containers"][0]["resources"]["limits"]

    # The webhook polls its policy directory every 2 s.
    await until(mapped, within=20)
    await extra_nodes([mig_node(MIG_NODE, mig_profiles("1g.10gb=7,3g.40gb=2"),
                                "NVIDIA-H100-80GB-HBM3", taint=True)])
    await core.create_namespaced_pod(namespace, body=notebook("alice", "10Gi"))
    [stored] = await pods_of(api, namespace, "alice")
    resources = stored["spec"]["containers"][0]["resources"]
    assert resources["limits"] == {MIG_1G: "1"}
    assert resources["requests"] == {"cpu": "2", "memory": "8Gi", MIG_1G: "1"}
    assert stored["spec"]["nodeSelector"] == MIXED
    assert stored["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == MIG_1G

    async def scheduled() -> bool:
        [p] = await pods_of(api, namespace, "alice")
        return bool(p["spec"].get("nodeName"))

    await until(scheduled, within=30)
    [placed] = await pods_of(api, namespace, "alice")
    assert placed["spec"]["nodeName"] == MIG_NODE

    # More than the largest slice: the apiserver relays the webhook's denial.
    with pytest.raises(ApiException) as denied:
        await core.create_namespaced_pod(namespace, body=notebook("bob", "500Gi"))
    message = orjson.loads(denied.value.body or b"{}").get("message", "")
    assert f"the largest is {MIG_3G} (40Gi, 3/7 of a GPU)" in message, message

    # A gang of slices: gated, then let go whole by the controller, which counts them in
    # GPU-equivalents, and placed on the MIG node by the scheduler.
    controllers.start()
    for i in range(2):
        await core.create_namespaced_pod(namespace, body=slice_member(i))
    assert all(gated(p) for p in await pods_of(api, namespace, "sweep-"))

    async def gang_placed() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_of(api, namespace, "sweep-"))

    await until(gang_placed, within=30)
    members = await pods_of(api, namespace, "sweep-")
    assert {p["spec"]["nodeName"] for p in members} == {MIG_NODE}
    assert all(p["spec"]["containers"][0]["resources"]["limits"] == {MIG_1G: "1"}
               for p in members)

    async def told() -> bool:
        # The event may follow the ungate the scheduler acted on.
        return any(m.startswith("Admitted: any domain; 2 pods, 2/7 GPUs")
                   for m in await events(api, namespace, "sweep-"))

    await until(told, within=10)
