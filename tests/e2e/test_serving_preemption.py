"""Who evicts for a serving pod, on the real kube-scheduler: as shipped, a serving pod is
not gated, and kube-scheduler's own preemption takes one pod of a training gang; with
the class's PriorityClass telling kube-scheduler `Never`, `queued: true` and
`preempts: true`, Airlock gates it and evicts one whole gang, with its events. And the
room Airlock frees for a serving gang stays the gang's: its pods are nominated there
before the victims go, so kube-scheduler gives that room to no serving pod of its own."""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import gang_pod, policy_yaml, template, workload
from tests.kube import (
    Controllers,
    PolicyFileFactory,
    all_bound,
    create_gang,
    dry_run,
    events,
    gated,
    pods_of,
    running_since,
    until,
)
from webhook.sandbox.stages import TERMINATION_DELAY

pytestmark = pytest.mark.usefixtures("airlock")

SERVING = "e2e-serving"
SHIPPED = "        name: airlock-inference\n        value: 100000\n"
# Airlock alone evicts for serving pods: a PriorityClass of the same value that tells
# kube-scheduler Never (a PriorityClass's preemptionPolicy cannot change, so a new one).
AIRLOCK_ALONE = (f"        name: {SERVING}\n        value: 100000\n"
                 "        preemptionPolicy: Never\n      queued: true\n      preempts: true\n")
IMAGE = "vllm/vllm-openai:v0.6.3"


def _vllm(namespace: str) -> dict[str, object]:
    return workload("apps/v1", "Deployment", "vllm", namespace, replicas=1,
                    selector={"matchLabels": {"app": "vllm"}},
                    template=template(IMAGE, gpus=8, labels={"app": "vllm"}))


async def _queued(api: client.ApiClient, namespace: str, expected: bool) -> bool:
    """Whether the webhook, as it reads its policy now, gates a serving pod as `expected`."""
    probe = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "probe"},
             "spec": {"containers": [{"name": "main", "image": IMAGE, "resources": {
                 "limits": {"nvidia.com/gpu": "1"}}}]}}
    stored = await dry_run(api, namespace, probe)
    return "spec" in stored and gated(stored) == expected


@pytest.fixture
async def airlock_alone(api: client.ApiClient, namespace: str,
                        session_policies: Path) -> AsyncIterator[None]:
    """The shipped inference class made Airlock's alone to evict for, for one test; the
    webhook reads it within 2 s, the controllers started after it at once."""
    await client.SchedulingV1Api(api).create_priority_class(body={
        "metadata": {"name": SERVING}, "value": 100000, "preemptionPolicy": "Never"})
    classes = session_policies / "10-classes.yaml"
    shipped = classes.read_text()
    assert SHIPPED in shipped
    classes.write_text(shipped.replace(SHIPPED, AIRLOCK_ALONE))
    try:
        await until(functools.partial(_queued, api, namespace, True), within=20)
        yield
    finally:
        classes.write_text(shipped)
        await until(functools.partial(_queued, api, namespace, False), within=20)
        await client.SchedulingV1Api(api).delete_priority_class(SERVING)


async def _full_of_training(api: client.ApiClient, namespace: str) -> None:
    """Two training gangs of 4 whole nodes fill the 64 GPUs, running for an hour."""
    for name in ("left", "right"):
        await create_gang(api, namespace, name, 4, cls="training")
    for name in ("left", "right"):
        await until(functools.partial(all_bound, api, namespace, name, 4), within=60)
    for p in await pods_of(api, namespace):
        await running_since(api, p, 1)


PREEMPT_NOW = policy_yaml("preempt-now", {"preemption": {
    "minRuntime": "1s", "delay": "0", "requeueBackoff": "1m"}})


TRAINING = [f"{gang}-{i}" for gang in ("left", "right") for i in range(4)]


async def _gone(api: client.ApiClient, namespace: str) -> list[str]:
    """The training pods evicted: being deleted, or deleted already (KWOK, like a
    kubelet, ends a deleted pod within moments)."""
    staying = {p["metadata"]["name"] for p in await pods_of(api, namespace)
               if not p["metadata"].get("deletionTimestamp")}
    return [name for name in TRAINING if name not in staying]


async def _gone_count(api: client.ApiClient, namespace: str, count: int) -> bool:
    return len(await _gone(api, namespace)) >= count


async def _serving_comes(api: client.ApiClient, namespace: str, controllers: Controllers,
                         policy_file: PolicyFileFactory, evicted: int
                         ) -> tuple[dict[str, Any], list[str]]:
    """A serving Deployment's pod comes to a cluster full of training: once `evicted`
    training pods are gone and it is bound, the pod and the training pods gone."""
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    controllers.start()
    await _full_of_training(api, namespace)
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body=_vllm(namespace))
    await until(lambda: _gone_count(api, namespace, evicted), within=60)

    async def bound() -> bool:
        pods = await pods_of(api, namespace, "vllm-")
        return len(pods) == 1 and bool(pods[0]["spec"].get("nodeName"))

    await until(bound, within=60)
    (serving,) = await pods_of(api, namespace, "vllm-")
    return serving, await _gone(api, namespace)


async def test_as_shipped_kube_scheduler_takes_one_pod_of_a_training_gang(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    serving, gone = await _serving_comes(api, namespace, controllers, policy_file, 1)
    assert not gated(serving)
    # One pod of a gang, chosen by kube-scheduler, which says so; no word of Airlock's.
    (victim,) = gone
    told = await events(api, namespace, victim)
    assert any(m.startswith("Preempted by pod") for m in told), told
    assert not [m for m in told if m.startswith("Preempted:")]


@pytest.mark.usefixtures("airlock_alone")
async def test_airlock_alone_evicts_a_whole_gang_for_a_serving_pod(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    serving, gone = await _serving_comes(api, namespace, controllers, policy_file, 4)
    # One whole gang, and only it: every pod of it told why, by Airlock.
    assert gone in ([f"left-{i}" for i in range(4)], [f"right-{i}" for i in range(4)])
    name = serving["metadata"]["name"]
    told = [m for m in await events(api, namespace) if m.startswith("Preempted")]
    assert len(told) == 4, told  # Airlock's, each "Preempted: ...", and none of kube-scheduler's
    assert all(f"evicted to make room for pod {namespace}/{name}" in m for m in told)
    assert serving["spec"]["priorityClassName"] == SERVING
    assert serving["spec"]["preemptionPolicy"] == "Never"


async def _serving_evicts_slow_scavengers(api: client.ApiClient, namespace: str,
                                          controllers: Controllers,
                                          policy_file: PolicyFileFactory, size: int
                                          ) -> set[str]:
    """Half the cluster serves; the other half runs 4 scavengers that take 15 s to end
    once deleted, as pods saving their work do. A serving gang of `size` comes and evicts
    them; returned once its gated pods are nominated to nodes of theirs, which are still
    terminating: the scavengers' nodes."""
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    controllers.start()
    core = client.CoreV1Api(api)
    await create_gang(api, namespace, "serve", 4, image=IMAGE)
    await asyncio.gather(*(core.create_namespaced_pod(namespace, body=gang_pod(
        "scav", i, 4, cls="scavenger", annotations={TERMINATION_DELAY: "15s"}))
        for i in range(4)))
    for name in ("serve", "scav"):
        await until(functools.partial(all_bound, api, namespace, name, 4), within=60)
    for p in await pods_of(api, namespace, "scav"):
        await running_since(api, p, 1)
    scav_nodes = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "scav")}
    await create_gang(api, namespace, "infer", size, image=IMAGE)

    async def nominated() -> bool:
        pods, scav = await pods_of(api, namespace, "infer"), await pods_of(api, namespace,
                                                                           "scav")
        chosen = {p["status"].get("nominatedNodeName") for p in pods}
        return len(pods) == size and all(gated(p) for p in pods) and \
            len(chosen) == size and chosen <= scav_nodes and \
            len(scav) == 4 and all(p["metadata"].get("deletionTimestamp") for p in scav)

    await until(nominated, within=60)
    return scav_nodes


async def test_the_room_freed_for_a_serving_gang_is_not_taken_by_a_serving_pod(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    scav_nodes = await _serving_evicts_slow_scavengers(api, namespace, controllers,
                                                       policy_file, 4)
    # A serving Deployment's pod, not gated, of the same priority: kube-scheduler would
    # give it the first node the scavengers free, and the gang would be one node short.
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body=_vllm(namespace))
    await until(functools.partial(all_bound, api, namespace, "infer", 4), within=60)
    assert {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "infer")} == \
        scav_nodes
    (serving,) = await pods_of(api, namespace, "vllm-")
    assert not gated(serving)
    assert not serving["spec"].get("nodeName")  # no room left for it: it waits
    assert len(await pods_of(api, namespace, "serve")) == 4  # and took none from `serve`


async def test_room_still_being_freed_beyond_the_preemptors_is_nobodys_until_free(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    # A serving gang of 2 evicts the 4 scavengers and holds 2 of their nodes. A training
    # gang of 2 fits in the other 2 once the scavengers there are gone; lifted before,
    # kube-scheduler (which counts a terminating pod's room) would bind what it could
    # and leave the rest Pending (seen on the sandbox: 17 GPU-hours half placed).
    scav_nodes = await _serving_evicts_slow_scavengers(api, namespace, controllers,
                                                       policy_file, 2)
    await create_gang(api, namespace, "train", 2, cls="training")
    lifted_while_terminating: set[str] = set()
    while await pods_of(api, namespace, "scav"):
        lifted_while_terminating |= {p["metadata"]["name"]
                                     for p in await pods_of(api, namespace, "train")
                                     if not gated(p)}
        await asyncio.sleep(0.2)
    assert lifted_while_terminating == set()
    # Then both gangs go, whole, into the room the scavengers left.
    for name in ("infer", "train"):
        await until(functools.partial(all_bound, api, namespace, name, 2), within=60)
    placed = {p["spec"]["nodeName"] for name in ("infer", "train")
              for p in await pods_of(api, namespace, name)}
    assert placed == scav_nodes
