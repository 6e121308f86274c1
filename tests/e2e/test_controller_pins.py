"""Placements that hold, on the real control plane with the real kube-scheduler (its
default scoring, which weighs CPU and memory, not GPUs, and puts small pods on empty nodes
first): each pod Airlock lets go is pinned to the node its gang's plan gave it, and lands
there; a pod whose planned node goes NotReady before it is bound is re-planned, made again
by its Job and placed on a node that takes it; and a controller killed half-way through a
lift leaves the next leader the nodes to pin the rest to."""

from __future__ import annotations

import json
import signal
import uuid
from typing import Any

from kubernetes_asyncio import client

from tests.builders import template
from tests.kube import Controllers, NodeFactory, events, gated, pods_of, until
from webhook.keys import (
    CLASS_LABEL,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    PLACEMENT_ANNOTATION,
)
from webhook.sandbox.nodes import CLIQUE_LABEL, HOST_LABEL, KWOK_NODE, node_manifest

POOL = "e2e.gpu-airlock.io/pool"
LOADER = "e2e.gpu-airlock.io/loader"


def job(name: str, gang: str, size: int, pods: int, gpus: int,
        spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """A Job of `pods` pods of `gpus` GPUs, each a member of gang `gang` of `size`."""
    pod_template = template(gpus=gpus, labels={CLASS_LABEL: "training",
                                               GANG_NAME_LABEL: gang}, **(spec or {}))
    pod_template["metadata"]["annotations"] = {GANG_SIZE_ANNOTATION: str(size)}
    pod_template["spec"]["restartPolicy"] = "Never"
    return {"metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "template": pod_template}}


async def planned(api: client.ApiClient, ns: str, prefix: str) -> dict[str, str]:
    """The node each pod was planned on, from the placement records on the pods."""
    found: dict[str, str] = {}
    for p in await pods_of(api, ns, prefix):
        text = (p["metadata"].get("annotations") or {}).get(PLACEMENT_ANNOTATION)
        if text:
            found.update(json.loads(text).get("nodes") or {})
    return found


async def landed_as_planned(api: client.ApiClient, ns: str, prefix: str, count: int
                            ) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The `count` pods named `prefix`... once all are bound, and the plan they were bound
    by: where the plan packed them (best fit), not where the scheduler's scoring alone
    would have spread them (the emptiest nodes of the domain)."""
    async def bound() -> bool:
        pods = await pods_of(api, ns, prefix)
        return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)

    await until(bound, within=60)
    pods, plan = await pods_of(api, ns, prefix), await planned(api, ns, prefix)
    assert {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods} == plan
    return pods, plan


async def test_a_gang_of_small_pods_lands_exactly_on_its_planned_nodes(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    controllers.start()
    batch = client.BatchV1Api(api)
    # One gang of six pods, two each of 4, 2 and 1 GPUs, from three Jobs.
    for gpus in (4, 2, 1):
        await batch.create_namespaced_job(namespace, body=job(f"mixed-{gpus}", "mixed", 6,
                                                              2, gpus))

    pods, plan = await landed_as_planned(api, namespace, "mixed", 6)
    for p in pods:
        (term,) = p["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term["matchFields"] == [{"key": "metadata.name", "operator": "In",
                                        "values": [plan[p["metadata"]["name"]]]}]


async def test_a_gang_of_bare_pods_lands_on_the_nodes_it_is_steered_to(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    """Pods no owner makes again are not pinned (a failed node would strand them): they
    prefer their planned node, and are nominated to it, which kube-scheduler takes
    before it scores any (its scoring would spread them over the emptiest nodes, and the
    class's pod affinity ties with a preferred node)."""
    controllers.start()
    core = client.CoreV1Api(api)
    for i, gpus in enumerate((4, 4, 2, 2, 1, 1)):
        body = template(gpus=gpus, labels={CLASS_LABEL: "training", GANG_NAME_LABEL: "bare"})
        body["metadata"] = {**body.get("metadata", {}), "name": f"bare-{i}",
                            "annotations": {GANG_SIZE_ANNOTATION: "6"}}
        body["spec"]["restartPolicy"] = "Never"
        await core.create_namespaced_pod(namespace, body={"apiVersion": "v1", "kind": "Pod",
                                                          **body})

    pods, plan = await landed_as_planned(api, namespace, "bare", 6)
    for p in pods:
        assert p["status"].get("nominatedNodeName") == plan[p["metadata"]["name"]]
        affinity = p["spec"]["affinity"]["nodeAffinity"]
        assert affinity["preferredDuringSchedulingIgnoredDuringExecution"] == [
            {"weight": 100, "preference": {"matchFields": [
                {"key": "metadata.name", "operator": "In",
                 "values": [plan[p["metadata"]["name"]]]}]}}]
        assert all(f["operator"] == "NotIn" for term in affinity.get(
            "requiredDuringSchedulingIgnoredDuringExecution", {}).get("nodeSelectorTerms", [])
            for f in term.get("matchFields", [])), "preferred, never pinned"


async def test_pins_survive_a_controller_killed_half_way_through_a_lift(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    """The next leader lifts the members still gated onto the nodes the record names."""
    slow = controllers.start("--patch-pause", "1.0")
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=job(
        "crash", "crash", 4, 4, 2))

    async def half_way() -> bool:
        pods = await pods_of(api, namespace, "crash")
        return len(pods) == 4 and bool(await planned(api, namespace, "crash")) and \
            0 < sum(not gated(p) for p in pods) < 4

    await until(half_way, within=60)
    slow.process.send_signal(signal.SIGKILL)
    slow.process.wait()
    assert 0 < sum(gated(p) for p in await pods_of(api, namespace, "crash")) < 4, \
        "the kill must land half-way"
    plan = await planned(api, namespace, "crash")
    controllers.start()

    async def bound() -> bool:
        pods = await pods_of(api, namespace, "crash")
        return len(pods) == 4 and all(p["spec"].get("nodeName") for p in pods)

    await until(bound, within=60)
    assert {p["metadata"]["name"]: p["spec"]["nodeName"]
            for p in await pods_of(api, namespace, "crash")} == plan
    assert any(m.startswith("Resumed:") for m in await events(api, namespace, "crash"))


def pool_nodes(pool: str) -> list[dict[str, Any]]:
    """Two 8-GPU nodes of one NVLink domain of this test's own, tainted so that nothing
    else goes there."""
    nodes = [node_manifest(f"{pool}-{i}", 8, {POOL: pool, CLIQUE_LABEL: pool},
                           "NVIDIA-H100-80GB-HBM3", taint=False) for i in range(2)]
    for node in nodes:
        node["spec"]["taints"] = [{"key": POOL, "value": pool, "effect": "NoSchedule"}]
    return nodes


def in_pool(pool: str) -> dict[str, Any]:
    """What a pod needs to go to the pool's nodes."""
    return {"nodeSelector": {POOL: pool},
            "tolerations": [{"key": POOL, "operator": "Exists", "effect": "NoSchedule"}]}


async def not_ready(api: client.ApiClient, name: str) -> None:
    """The node reports NotReady, as a kubelet that stopped would. KWOK stops managing it
    first: it would report it Ready again."""
    core = client.CoreV1Api(api)
    await core.patch_node(name, {"metadata": {"annotations": {KWOK_NODE[0]: None}}})
    await core.patch_node_status(name, {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "KubeletNotReady",
         "message": "e2e: the node stopped"}]}})


async def test_a_pod_whose_planned_node_goes_not_ready_before_binding_is_replanned(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        extra_nodes: NodeFactory) -> None:
    pool = f"pins-{uuid.uuid4().hex[:6]}"
    await extra_nodes(pool_nodes(pool))
    controllers.start()
    # Its pods must run beside a loader pod, which Airlock does not weigh (it places by
    # nodes, not by other pods): let go and pinned, they stay unbound until it exists.
    beside = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {LOADER: pool}}, "topologyKey": POOL}]}}
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=job(
        "pinned", "pinned", 2, 2, 2, {**in_pool(pool), "affinity": beside}))

    async def live() -> list[dict[str, Any]]:
        return [p for p in await pods_of(api, namespace, "pinned")
                if not p["metadata"].get("deletionTimestamp")]

    async def let_go_and_pinned(away_from: str | None = None) -> bool:
        pods, plan = await live(), await planned(api, namespace, "pinned")
        return len(pods) == 2 and all(
            not gated(p) and plan.get(p["metadata"]["name"]) not in (None, away_from)
            for p in pods)

    await until(let_go_and_pinned, within=60)
    first = {p["metadata"]["name"] for p in await live()}
    plan = await planned(api, namespace, "pinned")
    assert not any(p["spec"].get("nodeName") for p in await live())
    lost = plan[min(first)]
    await not_ready(api, lost)

    await until(lambda: let_go_and_pinned(away_from=lost), within=90)
    assert not first & {p["metadata"]["name"] for p in await live()}, "made again"
    assert any(m.startswith(f"Replanned: node {lost}, where Airlock pinned it, is NotReady")
               for m in await events(api, namespace, "pinned"))
    # The loader comes, on the node that is still Ready: the new pods bind as planned.
    (kept,) = {f"{pool}-0", f"{pool}-1"} - {lost}
    loader = {"apiVersion": "v1", "kind": "Pod",
              "metadata": {"name": "loader", "labels": {LOADER: pool}},
              "spec": {**in_pool(pool), "nodeSelector": {POOL: pool, HOST_LABEL: kept},
                       "containers": [{"name": "main", "image": "ghcr.io/acme/loader:1.0"}]}}
    await client.CoreV1Api(api).create_namespaced_pod(namespace, body=loader)

    async def bound() -> bool:
        pods = await live()
        return len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods)

    await until(bound, within=60)
    plan = await planned(api, namespace, "pinned")
    for p in await live():
        assert p["spec"]["nodeName"] == plan[p["metadata"]["name"]] == kept


async def test_a_pod_admitted_while_a_gang_binds_is_kept_off_the_gangs_room(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        extra_nodes: NodeFactory) -> None:
    """Bare pods, which Airlock pins to no node (nothing would make one again): a gang's
    pod let go onto the empty node but not bound yet, then a single pod admitted beside
    it. To the scheduler the gang's node is empty, and its scoring would put the single pod
    there, stranding the gang; fenced off it, the pod goes to the other."""
    pool = f"fence-{uuid.uuid4().hex[:6]}"
    await extra_nodes(pool_nodes(pool))
    empty, busy = f"{pool}-0", f"{pool}-1"
    core = client.CoreV1Api(api)

    def bare(name: str, gpus: int, labels: dict[str, str], **spec: Any) -> dict[str, Any]:
        body = template(gpus=gpus, labels=labels)
        body.setdefault("metadata", {}).update(name=name)
        body["spec"].update(in_pool(pool), **spec)
        return {"apiVersion": "v1", "kind": "Pod", **body}

    # 2 of the busy node's GPUs taken by a pod that names its node (the admin may).
    await core.create_namespaced_pod(namespace, body=bare("busy", 2, {}, nodeName=busy))
    # The gang's one pod of 8 GPUs waits, once let go, for a loader that is not there yet.
    beside = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {LOADER: pool}}, "topologyKey": POOL}]}}
    held = bare("held-0", 8, {CLASS_LABEL: "training", GANG_NAME_LABEL: "held"},
                affinity=beside)
    held["metadata"]["annotations"] = {GANG_SIZE_ANNOTATION: "1"}
    controllers.start()
    await core.create_namespaced_pod(namespace, body=held)

    async def let_go() -> bool:
        (pod,) = await pods_of(api, namespace, "held")
        return not gated(pod)

    await until(let_go, within=60)
    await core.create_namespaced_pod(namespace, body=bare("small", 4,
                                                          {CLASS_LABEL: "training"}))

    async def small_bound() -> bool:
        (pod,) = await pods_of(api, namespace, "small")
        return bool(pod["spec"].get("nodeName"))

    await until(small_bound, within=60)
    (small,) = await pods_of(api, namespace, "small")
    record = json.loads(small["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    assert record.get("fencedOff") == [empty]
    assert small["spec"]["nodeName"] == busy
    # The loader comes: the gang's pod binds whole, where its room was kept.
    await core.create_namespaced_pod(namespace, body=bare("loader", 0, {LOADER: pool},
                                                          nodeName=empty))

    async def held_bound() -> bool:
        (pod,) = await pods_of(api, namespace, "held")
        return bool(pod["spec"].get("nodeName") == empty)

    await until(held_bound, within=60)
