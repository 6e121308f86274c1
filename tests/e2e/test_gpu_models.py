"""GPU models on a mixed cluster, told apart by GPU feature discovery's product label.

On the shared plane's H100 nodes and two A100 nodes added for the test: a queue with
quotas per model takes H100s up to its quota, then A100s; each gang lands whole on one
model, pinned there at ungate, and placed by the real kube-scheduler.

On the mixed sandbox (`sandbox up --pools h100=2x8,a100=4x8`), with indexed Jobs: a gang
that names H100 waits for its quota with A100s free; one that names no model lands whole
on A100 rather than split; a higher-priority H100 gang evicts H100 work only; a queue
borrowing H100 loses it to the owner, and keeps its A100 work; `airlock status` shows
each queue's use of each model."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import PRODUCT, PRODUCTS, indexed_job, policy_yaml, template, workload
from tests.commands import airlock_command
from tests.kube import (
    Controllers,
    NamespaceFactory,
    NodeFactory,
    PolicyFileFactory,
    WiredPlane,
    all_bound,
    create_gang,
    dry_run,
    events,
    free_gpus,
    fresh_namespaces,
    gated,
    nodes_by_name,
    pods_of,
    running_since,
    until,
)
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.nodes import CLIQUE_LABEL, Shape, node_manifest


async def _models_of(api: client.ApiClient, ns: str, prefix: str) -> set[tuple[str, str]]:
    """Each pod's node's product, and the product its nodeSelector pins it to."""
    nodes = await nodes_by_name(api)
    return {(nodes[p["spec"]["nodeName"]][PRODUCT], p["spec"]["nodeSelector"][PRODUCT])
            for p in await pods_of(api, ns, prefix)}


async def test_a_queue_takes_its_h100s_then_its_a100s_each_gang_whole_on_one_model(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        extra_nodes: NodeFactory, policy_file: PolicyFileFactory) -> None:
    shape = Shape()
    assert shape.product == PRODUCTS["h100"]
    await extra_nodes([node_manifest(f"a100-{i}", 8, {CLIQUE_LABEL: "clique-a100"},
                                     PRODUCTS["a100"], shape.taint_gpus) for i in range(2)])
    policy_file("92-models.yaml", policy_yaml("e2e-models", {
        "gpuModels": [{"name": m, "nodeLabels": {PRODUCT: PRODUCTS[m]}}
                      for m in ("h100", "a100")],
        "queues": [{"name": "modelled", "namespaces": [namespace], "models": [
            {"model": "h100", "nominal": 8, "borrowingLimit": 0},
            {"model": "a100", "nominal": 16}]}]}))
    controllers.start()

    await create_gang(api, namespace, "first", 1, cls="training")
    await until(lambda: all_bound(api, namespace, "first", 1), within=60)
    h100 = PRODUCTS["h100"]
    assert await _models_of(api, namespace, "first") == {(h100, h100)}

    # The queue's 8 H100s are taken and it may not borrow more: the next gang goes whole
    # to its A100s, though 56 H100 GPUs stand free.
    await create_gang(api, namespace, "second", 2, cls="training")
    await until(lambda: all_bound(api, namespace, "second", 2), within=60)
    a100 = PRODUCTS["a100"]
    assert await _models_of(api, namespace, "second") == {(a100, a100)}


@pytest.mark.usefixtures("airlock")
async def test_a_serving_replica_that_names_a_model_lands_on_it_ungated(
        api: client.ApiClient, namespace: str, extra_nodes: NodeFactory,
        policy_file: PolicyFileFactory) -> None:
    """A Deployment's replicas are inference, which Airlock does not gate: no controller
    places them, so admission keeps them to their model in their required node affinity,
    and the real kube-scheduler (spreading over the emptiest nodes, most of them H100)
    binds them on the two A100 nodes only."""
    shape = Shape()
    await extra_nodes([node_manifest(f"a100-{i}", 8, {CLIQUE_LABEL: "clique-a100"},
                                     PRODUCTS["a100"], shape.taint_gpus) for i in range(2)])
    policy_file("92-models.yaml", policy_yaml("e2e-models", {
        "gpuModels": [{"name": m, "nodeLabels": {PRODUCT: PRODUCTS[m]}}
                      for m in ("h100", "a100")]}))
    pod_template = template("vllm/vllm-openai:v0.6.3", gpus=1, labels={"app": "vllm"})
    pod_template["metadata"]["annotations"] = {GPU_MODELS_ANNOTATION: "a100"}

    async def reloaded() -> bool:  # the webhook reads the new policy within 2 s
        probe = {**pod_template, "apiVersion": "v1", "kind": "Pod", "metadata": {
            **pod_template["metadata"], "name": "probe", "namespace": namespace}}
        stored = await dry_run(api, namespace, probe)  # denied until it knows a100
        return "nodeAffinity" in json.dumps(stored.get("spec"))

    await until(reloaded, within=30)
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body=workload(
        "apps/v1", "Deployment", "vllm", namespace, replicas=4,
        selector={"matchLabels": {"app": "vllm"}}, template=pod_template))
    await until(lambda: all_bound(api, namespace, "vllm-", 4), within=60)
    nodes = await nodes_by_name(api)
    replicas = await pods_of(api, namespace, "vllm-")
    assert {nodes[p["spec"]["nodeName"]][PRODUCT] for p in replicas} == {PRODUCTS["a100"]}
    assert not any(gated(p) for p in replicas)


# --- the mixed sandbox (`sandbox up --pools h100=2x8,a100=4x8`) -------------------------
# One queue's quotas are all of it, 16 H100 GPUs and 32 A100, with nothing to borrow; the
# gangs are indexed Jobs, made into pods by the real Job controller.

MODELS = [{"name": m, "nodeLabels": {PRODUCT: PRODUCTS[m]}} for m in ("h100", "a100")]
PREEMPT_NOW = policy_yaml("preempt-now", {"preemption": {
    "minRuntime": "1s", "delay": "0", "requeueBackoff": "1m"}})


@pytest.fixture
async def mixed_api(pools_plane: WiredPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(pools_plane.plane.admin_kubeconfig) as api_client:
        yield api_client


@pytest.fixture
def mixed_controllers(pools_plane: WiredPlane, tmp_path: Path, session_policies: Path
                      ) -> Iterator[Controllers]:
    with pools_plane.controllers(tmp_path, session_policies) as running:
        yield running


@pytest.fixture
async def mixed_namespaces(mixed_api: client.ApiClient) -> AsyncIterator[NamespaceFactory]:
    async with fresh_namespaces(mixed_api) as make:
        yield make


async def _one_queue(namespaces: NamespaceFactory, policy_file: PolicyFileFactory,
                     controllers: Controllers, *more: str) -> str:
    """A namespace; the models, the queue of it that has them all, `more` policy files;
    the controller."""
    namespace = await namespaces()
    policy_file("92-models.yaml", policy_yaml("e2e-mixed", {
        "gpuModels": MODELS, "queues": [{"name": "mixed", "namespaces": [namespace],
                                         "models": [
            {"model": "h100", "nominal": 16, "borrowingLimit": 0},
            {"model": "a100", "nominal": 32, "borrowingLimit": 0}]}]}))
    for i, text in enumerate(more):
        policy_file(f"93-more-{i}.yaml", text)
    controllers.start()
    await asyncio.sleep(3)  # the webhook reloads its policy within 2 s
    return namespace


async def _job(api: client.ApiClient, ns: str, name: str, pods: int, cls: str = "training",
               models: str | None = None) -> None:
    named = {GPU_MODELS_ANNOTATION: models} if models else {}
    await client.BatchV1Api(api).create_namespaced_job(
        ns, body=indexed_job(name, pods, named, cls=cls))


async def _bound(api: client.ApiClient, ns: str, name: str, pods: int, within: float = 90
                 ) -> set[tuple[str, str]]:
    """Once the Job's pods are all bound: their nodes' products and their pins."""
    await until(functools.partial(all_bound, api, ns, name, pods), within=within)
    return await _models_of(api, ns, name)


async def _placed(api: client.ApiClient, ns: str, name: str, pods: int,
                  models: str | None = None) -> set[tuple[str, str]]:
    """A training Job made, and once bound, its nodes' products and its pods' pins."""
    await _job(api, ns, name, pods, models=models)
    return await _bound(api, ns, name, pods)


async def _alive(api: client.ApiClient, ns: str, prefix: str) -> list[dict[str, Any]]:
    return [p for p in await pods_of(api, ns, prefix)
            if not p["metadata"].get("deletionTimestamp")]


H100, A100 = PRODUCTS["h100"], PRODUCTS["a100"]
MODEL_OF = {H100: "h100", A100: "a100"}


async def _running(api: client.ApiClient, ns: str, jobs: dict[str, tuple[str, float]],
                   cls: str = "training") -> None:
    """Jobs of 2 workers, each on its product (name -> product, hours run), bound there
    and said to have run that long."""
    for name, (product, _) in jobs.items():
        await _job(api, ns, name, 2, cls=cls, models=MODEL_OF[product])
    for name, (product, hours) in jobs.items():
        assert await _bound(api, ns, name, 2) == {(product, product)}
        for p in await pods_of(api, ns, name):
            await running_since(api, p, hours)


async def _evicted_for(api: client.ApiClient, victims: tuple[str, str],
                       gang: tuple[str, str], kept: tuple[str, str]) -> None:
    """The H100 Job `victims` (namespace, name) goes, the H100 `gang` of 2 lands on H100
    in its room, and `kept` runs on."""
    async def evicted() -> bool:
        return not await _alive(api, *victims)

    await until(evicted, within=90)
    assert await _bound(api, *gang, 2) == {(H100, H100)}
    assert len(await _alive(api, *kept)) == 2


async def test_an_h100_gang_waits_for_the_h100_quota_with_a100_nodes_free(
        mixed_api: client.ApiClient, mixed_namespaces: NamespaceFactory,
        mixed_controllers: Controllers, policy_file: PolicyFileFactory) -> None:
    ns = await _one_queue(mixed_namespaces, policy_file, mixed_controllers)
    assert await _placed(mixed_api, ns, "first", 2, "h100") == {(H100, H100)}
    await _job(mixed_api, ns, "second", 1, models="h100")

    async def waiting() -> bool:
        return any(m.startswith("Waiting") for m in await events(mixed_api, ns, "second"))

    await until(waiting, within=60)
    await asyncio.sleep(5)  # rounds go by: 32 A100 GPUs free, and it keeps waiting
    (second,) = await pods_of(mixed_api, ns, "second")
    assert gated(second)
    assert not second["spec"].get("nodeName")
    free = await free_gpus(mixed_api)
    nodes = await nodes_by_name(mixed_api)
    assert sum(g for n, g in free.items() if nodes[n].get(PRODUCT) == A100) == 32
    # The H100 quota frees: it goes there.
    await client.BatchV1Api(mixed_api).delete_namespaced_job(
        "first", ns, propagation_policy="Background")
    assert await _bound(mixed_api, ns, "second", 1) == {(H100, H100)}


async def test_a_gang_of_no_model_lands_whole_on_a100_and_never_straddles(
        mixed_api: client.ApiClient, mixed_namespaces: NamespaceFactory,
        mixed_controllers: Controllers, policy_file: PolicyFileFactory) -> None:
    ns = await _one_queue(mixed_namespaces, policy_file, mixed_controllers)
    assert await _placed(mixed_api, ns, "half", 1, "h100") == {(H100, H100)}
    # 8 H100 GPUs free, and 8 of the quota: 16 GPUs would fit only split across models.
    assert await _placed(mixed_api, ns, "whole", 2) == {(A100, A100)}


async def test_a_higher_priority_h100_gang_evicts_only_h100_work(
        mixed_api: client.ApiClient, mixed_namespaces: NamespaceFactory,
        mixed_controllers: Controllers, policy_file: PolicyFileFactory) -> None:
    ns = await _one_queue(mixed_namespaces, policy_file, mixed_controllers, PREEMPT_NOW)
    # Scavengers on both models; those on A100 have run less: the cheaper victims, were
    # they on the model the gang needs.
    await _running(mixed_api, ns, {"scav-h": (H100, 5), "scav-a": (A100, 1)}, "scavenger")
    await _job(mixed_api, ns, "urgent", 2, models="h100")
    await _evicted_for(mixed_api, (ns, "scav-h"), (ns, "urgent"), (ns, "scav-a"))


async def test_borrowing_of_one_model_is_reclaimed_on_that_model_only(
        mixed_api: client.ApiClient, mixed_namespaces: NamespaceFactory,
        mixed_controllers: Controllers, policy_file: PolicyFileFactory) -> None:
    owner, borrower = await mixed_namespaces(), await mixed_namespaces()
    policy_file("92-models.yaml", policy_yaml("e2e-cohort", {
        "gpuModels": MODELS, "queues": [
            {"name": "owner", "namespaces": [owner], "models": [
                {"model": "h100", "nominal": 16}]},
            # Its quota is 32 A100s: with 16 H100s borrowed and 16 A100s it is at its
            # nominal over both models, and borrows H100 all the same.
            {"name": "borrower", "namespaces": [borrower], "models": [
                {"model": "a100", "nominal": 32}, {"model": "h100", "nominal": 0}]}]}))
    policy_file("93-preempt-now.yaml", PREEMPT_NOW)
    mixed_controllers.start()
    await asyncio.sleep(3)  # the webhook reloads its policy within 2 s
    await _running(mixed_api, borrower, {"on-a100": (A100, 1), "on-h100": (H100, 1)})
    # The owner's gang, of the same priority: only a reclaim makes room.
    await _job(mixed_api, owner, "mine", 2, models="h100")
    await _evicted_for(mixed_api, (borrower, "on-h100"), (owner, "mine"),
                       (borrower, "on-a100"))
    told = await events(mixed_api, borrower)
    assert any(m.startswith("Preempted: its queue borrowed GPUs their owner now reclaims")
               for m in told)


async def test_status_shows_usage_per_queue_and_model(
        pools_plane: WiredPlane, mixed_api: client.ApiClient,
        mixed_namespaces: NamespaceFactory, mixed_controllers: Controllers,
        policy_file: PolicyFileFactory, session_policies: Path) -> None:
    ns = await _one_queue(mixed_namespaces, policy_file, mixed_controllers)
    await _placed(mixed_api, ns, "h", 1, "h100")
    await _placed(mixed_api, ns, "a", 3, "a100")
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(pools_plane.plane.admin_kubeconfig),
                         "--policies", str(session_policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    assert shown.returncode == 0
    rows = [m for m in json.loads(out)["models"] if m["queue"] == "mixed"]
    assert rows == [
        {"queue": "mixed", "model": "h100", "nominal": 16, "used": 8, "borrowed": 0},
        {"queue": "mixed", "model": "a100", "nominal": 32, "used": 24, "borrowed": 0}]
