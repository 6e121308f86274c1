"""Room made where a training gang prefers to run, on the real apiserver with the shipped
policy (training prefers one NVLink domain): the cluster is full of 1-GPU scavengers
(a Deployment's), the cheapest two nodes to free lie in different domains, and a
2 x 8-GPU training gang makes room in one domain instead, within the premium."""

from __future__ import annotations

from collections import defaultdict

from kubernetes_asyncio import client

from tests.builders import policy_yaml, template, workload
from tests.kube import (
    Controllers,
    PolicyFileFactory,
    all_bound,
    all_running,
    create_gang,
    events,
    nodes_by_name,
    pods_of,
    running_since,
    until,
)
from webhook.keys import CLASS_LABEL

CLIQUE = "nvidia.com/gpu.clique"


async def test_a_full_cluster_of_scavengers_makes_room_in_one_nvlink_domain(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    policy_file("90-preempt-now.yaml", policy_yaml("preempt-now", {
        "preemption": {"minRuntime": "1s", "delay": "0", "requeueBackoff": "1m"}}))
    controllers.start()
    labels = await nodes_by_name(api)
    gpus = sorted(n for n in labels if CLIQUE in labels[n])
    assert len(gpus) == 8  # 2 domains of 4 nodes of 8 GPUs
    scavengers = workload(
        "apps/v1", "Deployment", "batch", namespace, replicas=64,
        selector={"matchLabels": {"app": "batch"}},
        template=template(gpus=1, labels={"app": "batch", CLASS_LABEL: "scavenger"}))
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body=scavengers)
    await until(lambda: all_bound(api, namespace, "batch", 64), within=120)
    # KWOK's own Running, first: a start time said before it would be said over.
    await until(lambda: all_running(api, namespace, "batch", 64), within=120)
    # The youngest, so cheapest, pods on one node of each domain; the rest older.
    by_domain: dict[str, list[str]] = defaultdict(list)
    for name in gpus:
        by_domain[labels[name][CLIQUE]].append(name)
    young = {nodes[0] for nodes in by_domain.values()}
    for p in await pods_of(api, namespace, "batch"):
        await running_since(api, p, 1 if p["spec"]["nodeName"] in young else 2)

    await create_gang(api, namespace, "train", 2, cls="training")

    async def bound() -> bool:
        return await all_bound(api, namespace, "train", 2)

    await until(bound, within=90)
    placed = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "train")}
    # One domain, though the cheapest two nodes (one per domain) were elsewhere:
    # 8 + 16 GPU-hours lost against 8 + 8, within the premium of 1.5.
    assert len({labels[n][CLIQUE] for n in placed}) == 1
    told = await events(api, namespace, "train")
    assert any("its preferred nvidia.com/gpu.clique domain" in m and "within the premium" in m
               for m in told), told
