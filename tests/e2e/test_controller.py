"""The gang controller on the real control plane, with the real kube-scheduler placing
what it lets go. The cluster: 8 nodes of 8 GPUs, NVLink domains clique-0 (gpu-0000..3)
and clique-1 (gpu-0004..7). Pods go through Airlock's webhook, which gates them."""

from __future__ import annotations

import asyncio
import json
import signal

from kubernetes_asyncio import client

from tests.builders import gang_pod, pod
from tests.kube import (
    GPUS_PER_NODE,
    Controllers,
    all_bound,
    create_gang,
    events,
    gated,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.keys import CLASS_LABEL, PLACEMENT_ANNOTATION
from webhook.sandbox.nodes import CLIQUE_LABEL


async def test_gang_lands_whole_inside_one_domain(api: client.ApiClient, namespace: str,
                                                  controllers: Controllers) -> None:
    controllers.start()
    await create_gang(api, namespace, "ddp", 4)

    await until(lambda: all_bound(api, namespace, "ddp", 4))
    pods = await pods_of(api, namespace, "ddp")
    nodes = await nodes_by_name(api)
    domains = {nodes[p["spec"]["nodeName"]][CLIQUE_LABEL] for p in pods}
    assert len(domains) == 1
    (domain,) = domains
    assert all(p["spec"]["nodeSelector"] == {CLIQUE_LABEL: domain} for p in pods)
    assert any(f"Admitted: domain {domain}" in e for e in await events(api, namespace))


async def test_a_gang_that_cannot_fit_never_runs_partially(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    controllers.start()
    await create_gang(api, namespace, "huge", 9)  # 72 GPUs; the cluster has 64

    async def said_why() -> bool:
        return any("Waiting: 9/9 pods present; needs 72 GPUs" in e
                   for e in await events(api, namespace))

    await until(said_why)
    await asyncio.sleep(2)
    pods = await pods_of(api, namespace, "huge")
    assert len(pods) == 9
    assert all(gated(p) and not p["spec"].get("nodeName") for p in pods)


async def test_incomplete_gang_waits_for_every_member(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    controllers.start()
    await create_gang(api, namespace, "late", 3, count=2)

    async def said_two_of_three() -> bool:
        return any(e.startswith("Waiting: 2/3 pods present; needs 24 GPUs")
                   for e in await events(api, namespace))

    await until(said_two_of_three)
    assert all(gated(p) for p in await pods_of(api, namespace, "late"))
    await client.CoreV1Api(api).create_namespaced_pod(namespace,
                                                      body=gang_pod("late", 2, 3))

    async def all_bound() -> bool:
        pods = await pods_of(api, namespace, "late")
        return len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)

    await until(all_bound)


async def test_competing_gangs_are_admitted_by_priority(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    core = client.CoreV1Api(api)
    # Fill every GPU with bound pods so both gangs wait side by side.
    # Bare pods: an ownerReference to a Job that does not exist would have the garbage
    # collector remove them.
    blockers = [pod(f"blocker-{i}").gpus(GPUS_PER_NODE).label(CLASS_LABEL, "scavenger")
                .label("role", "blocker").set("nodeName", f"gpu-{i:04d}").build()
                for i in range(8)]
    for b in blockers:
        del b["metadata"]["namespace"]
    await asyncio.gather(*(core.create_namespaced_pod(namespace, body=b) for b in blockers))
    controllers.start()
    # Each gang needs 6 of the 8 nodes: only one of them can run.
    await create_gang(api, namespace, "batch", 6, cls="scavenger")
    await create_gang(api, namespace, "urgent", 6, cls="training")

    async def both_waiting() -> bool:
        for gang in ("batch", "urgent"):
            if not any(e.startswith("Waiting: 6/6") for e in await events(api, namespace, gang)):
                return False
        return True

    await until(both_waiting)
    await core.delete_collection_namespaced_pod(namespace, label_selector="role=blocker",
                                                grace_period_seconds=0)

    async def urgent_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_of(api, namespace, "urgent"))

    await until(urgent_bound)
    await asyncio.sleep(2)
    assert all(gated(p) for p in await pods_of(api, namespace, "batch"))


async def test_controller_killed_half_way_finishes_after_restart(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    # A slow lift (a pause between pod patches) gives the kill a moment to land in.
    slow = controllers.start("--patch-pause", "1.0")
    await create_gang(api, namespace, "crash", 4)

    async def half_way() -> bool:
        pods = await pods_of(api, namespace, "crash")
        recorded = any(PLACEMENT_ANNOTATION in (p["metadata"].get("annotations") or {})
                       for p in pods)
        return recorded and 0 < sum(not gated(p) for p in pods) < 4

    await until(half_way)
    slow.process.send_signal(signal.SIGKILL)
    slow.process.wait()
    pods = await pods_of(api, namespace, "crash")
    assert 0 < sum(gated(p) for p in pods) < 4, "the kill must land half-way"
    record = json.loads(next(p["metadata"]["annotations"][PLACEMENT_ANNOTATION] for p in pods
                             if PLACEMENT_ANNOTATION in (p["metadata"].get("annotations") or {})))
    controllers.start()

    async def all_bound() -> bool:
        return all(p["spec"].get("nodeName") for p in await pods_of(api, namespace, "crash"))

    await until(all_bound)
    pods = await pods_of(api, namespace, "crash")
    nodes = await nodes_by_name(api)
    assert {nodes[p["spec"]["nodeName"]][CLIQUE_LABEL] for p in pods} == \
        {record["domain"]}
    used: dict[str, int] = {}
    for p in pods:
        node = p["spec"]["nodeName"]
        used[node] = used.get(node, 0) + int(
            p["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"])
    assert max(used.values()) <= GPUS_PER_NODE


async def test_two_replicas_one_leader_and_failover(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    replicas = {name: controllers.start(identity=name) for name in ("replica-a", "replica-b")}
    coordination = client.CoordinationV1Api(api)

    async def holder() -> str | None:
        try:
            lease = await coordination.read_namespaced_lease("airlock-controller",
                                                             "airlock-system")
        except client.exceptions.ApiException:
            return None
        holder_identity: str | None = lease.spec.holder_identity
        return holder_identity

    async def has_leader() -> bool:
        return await holder() in replicas

    await until(has_leader)
    leader = await holder()
    assert leader is not None
    await create_gang(api, namespace, "first", 2)

    async def lifted(prefix: str) -> bool:
        pods = await pods_of(api, namespace, prefix)
        return bool(pods) and not any(gated(p) for p in pods)

    async def first_lifted() -> bool:
        return await lifted("first")

    await until(first_lifted)
    leading = [name for name, proc in replicas.items() if "leading" in proc.tail(200)]
    assert leading == [leader], "exactly one replica decides"
    replicas[leader].process.kill()
    replicas[leader].process.wait()
    follower = next(name for name in replicas if name != leader)

    async def took_over() -> bool:
        return await holder() == follower

    await until(took_over, within=40)
    await create_gang(api, namespace, "second", 2)

    async def second_lifted() -> bool:
        return await lifted("second")

    await until(second_lifted)


async def test_owner_kind_not_installed_is_an_event_not_a_crash(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    proc = controllers.start()
    worker = (pod("tf-worker-0").gpus(8).label("training.kubeflow.org/job-name", "tf")
              .owner("TFJob", "tf", "kubeflow.org/v1").build())
    worker["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-4000-8000-0000000000f1"
    del worker["metadata"]["namespace"]
    await client.CoreV1Api(api).create_namespaced_pod(namespace, body=worker)

    async def explained() -> bool:
        return any(e.startswith("SizeUnknown: tfjobs.kubeflow.org/v1") and
                   "not installed" in e for e in await events(api, namespace))

    await until(explained)
    assert proc.process.poll() is None
    assert all(gated(p) for p in await pods_of(api, namespace, "tf-"))
