"""Targeted defragmentation on the real apiserver: the head of the queue (a training gang
that requires one NVLink domain) would fit in the cluster's free GPUs, but no domain
holds it. Airlock moves a Deployment's replica and a scavenger Job's pod out of one
domain, within the hour's budget, and never the pod of a protected class that moving
would cost less; the owners make them again, and Airlock places them elsewhere."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes_asyncio import client

from tests.builders import policy_yaml, template, workload
from tests.kube import (
    Controllers,
    PolicyFileFactory,
    all_bound,
    create_gang,
    events,
    gated,
    nodes_by_name,
    pods_of,
    running_since,
    until,
)
from webhook.keys import CLASS_LABEL, REQUIRED_TOPOLOGY_ANNOTATION

CLIQUE = "nvidia.com/gpu.clique"
HOST = "kubernetes.io/hostname"


def _on(hosts: list[str], cls: str, gpus: int, **spec: Any) -> dict[str, Any]:
    """A pod template of `cls` that only the nodes `hosts` may take."""
    made = template(gpus=gpus, labels={CLASS_LABEL: cls}, **spec)
    made["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": HOST, "operator": "In", "values": hosts}]}]}}}
    return made


async def test_a_replica_and_a_scavenger_move_so_the_head_gets_one_domain(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    policy_file("90-defragment.yaml", policy_yaml("defragment", {"preemption": {
        # No eviction by priority: only moves make room here.
        "enabled": False, "minRuntime": "1s", "delay": "0",
        "defragmentation": {"enabled": True, "movesPerHour": 2, "maxMovedShare": 0.5,
                            "protectedClasses": ["training"]}}}))
    controllers.start()
    labels = await nodes_by_name(api)
    cliques: dict[str, list[str]] = {}
    for name in sorted(n for n in labels if CLIQUE in labels[n]):
        cliques.setdefault(labels[name][CLIQUE], []).append(name)
    (first, second) = sorted(cliques.values())
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    # A filler holds second[1] while the movable pods are placed, so they land on
    # first[0]; their replacements may go to second[1] only.
    hosts = [first[0], second[1]]
    filler = workload("batch/v1", "Job", "filler", namespace, backoffLimit=0,
                      template=_on([second[1]], "scavenger", 8, restartPolicy="Never"))
    await batch.create_namespaced_job(namespace, body=filler)
    await until(lambda: all_bound(api, namespace, "filler", 1), within=60)
    web = workload("apps/v1", "Deployment", "web", namespace, replicas=1,
                   selector={"matchLabels": {"app": "web"}},
                   template=_on(hosts, "scavenger", 4))
    web["spec"]["template"]["metadata"]["labels"]["app"] = "web"
    await apps.create_namespaced_deployment(namespace, body=web)
    sweep = workload("batch/v1", "Job", "sweep", namespace, backoffLimit=6,
                     template=_on(hosts, "scavenger", 4, restartPolicy="Never"))
    await batch.create_namespaced_job(namespace, body=sweep)
    # A training pod in the other domain: moving its 4 GPUs would free that domain for
    # less, but its class is protected.
    keep = workload("batch/v1", "Job", "keep", namespace, backoffLimit=0,
                    template=_on([second[0]], "training", 4, restartPolicy="Never"))
    await batch.create_namespaced_job(namespace, body=keep)
    for prefix in ("web", "sweep", "keep"):
        await until(functools.partial(all_bound, api, namespace, prefix, 1), within=60)
    await batch.delete_namespaced_job("filler", namespace, propagation_policy="Foreground")
    await until(lambda: _gone(api, namespace, "filler"), within=60)
    before = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in await pods_of(api, namespace)}
    assert {before[n] for n in before if n.startswith(("web", "sweep"))} == {first[0]}
    for p in await pods_of(api, namespace):
        await running_since(api, p, 1)

    # Free: 24 GPUs in the first domain, 28 in the second; the gang needs 32 in one.
    head = {REQUIRED_TOPOLOGY_ANNOTATION: "nvlink"}
    await create_gang(api, namespace, "train", 4, cls="training", annotations=head)
    await until(lambda: all_bound(api, namespace, "train", 4), within=120)
    placed = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "train")}
    assert placed == set(first)

    # The two moved pods were made again, outside the domain; the protected one stays.
    async def remade() -> bool:
        pods = [p for p in await pods_of(api, namespace) if p["metadata"]["name"].startswith(
            ("web", "sweep")) and not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 2 and all(not gated(p) and p["spec"].get("nodeName") == second[1]
                                      for p in pods)

    await until(remade, within=60)
    (kept,) = await pods_of(api, namespace, "keep")
    assert kept["metadata"]["name"] == next(n for n in before if n.startswith("keep"))
    assert not kept["metadata"].get("deletionTimestamp")
    told = await events(api, namespace)
    moved = [m for m in told if m.startswith("Preempted: moved: the first in the queue")]
    assert len(moved) == 2, told
    assert any("moving 8 GPUs out of nvidia.com/gpu.clique domain" in m for m in told)


async def _gone(api: client.ApiClient, namespace: str, prefix: str) -> bool:
    return not await pods_of(api, namespace, prefix)


