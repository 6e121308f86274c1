"""GPU models told apart by DRA device attributes, on the DRA sandbox: its nodes' GPUs
are H100s by the `productName` their ResourceSlices publish. A queue that may use only
that model runs a gang there up to its quota, and the next waits over quota of it.

And a pod names its model through its DRA claim, with one A100 node added: a template
whose CEL selector asks for `productName` A100 sends its Job's gang to the A100 node,
though the queue tries H100 first and H100s are free; the real scheduler's DRA allocator
gives it A100 devices. A claim of a product no model is gets the pod refused at
admission, naming the models on offer."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import gang_pod, policy_yaml, workload
from tests.kube import (
    EIGHT,
    Controllers,
    PolicyFileFactory,
    WiredPlane,
    airlock_status,
    all_bound,
    allocated,
    claims_of,
    create_template,
    gated,
    pods_of,
    until,
)
from webhook.pools import parse_spec
from webhook.sandbox.devices import GPU_CLASS, GPU_DRIVER
from webhook.sandbox.nodes import Shape, create_nodes, topology

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 SXM4 80GB"
PRODUCT = f'device.attributes["{GPU_DRIVER}"].productName'
MODELS = [{"name": "h100", "deviceAttributes": {"productName": H100}},
          {"name": "a100", "deviceAttributes": {"productName": A100}}]


@pytest.fixture
async def a100_node(dra_api: client.ApiClient) -> AsyncIterator[str]:
    """One 8-GPU A100 node, its GPUs published by slices, removed after the test."""
    (node,) = topology(Shape(pools=parse_spec("a100=1x8"), dra=True))
    name: str = node["metadata"]["name"]
    await create_nodes(dra_api, [node], dra=True)
    yield name
    await client.CoreV1Api(dra_api).delete_node(name)
    await client.ResourceV1Api(dra_api).delete_collection_resource_slice(
        field_selector=f"spec.nodeName={name}")


def _models_policy(policy_file: PolicyFileFactory, namespace: str) -> None:
    """The models, told apart by productName alone; the namespace's queue tries H100
    first, with room for all the sandbox's H100s."""
    policy_file("92-dra-models.yaml", policy_yaml("e2e-dra-models", {
        "gpuModels": MODELS, "queues": [{"name": "dra-models", "namespaces": [namespace],
                                         "models": [{"model": "h100", "nominal": 128},
                                                    {"model": "a100", "nominal": 8}]}]}))


async def test_a_gang_whose_claim_selects_a100_lands_whole_on_the_a100_node(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers,
        a100_node: str, policy_file: PolicyFileFactory) -> None:
    (ns,) = spaces
    _models_policy(policy_file, ns)
    await create_template(dra_api, ns, "a100s", GPU_CLASS, 4, selector=f'{PRODUCT} == "{A100}"')
    dra_controllers.start()
    job = workload("batch/v1", "Job", "picky", ns, parallelism=2, completions=2,
                   completionMode="Indexed", backoffLimit=0, template={"spec": {
                       "restartPolicy": "Never",
                       "containers": [{"name": "main", "image": "ghcr.io/acme/trainer:1.0",
                                       "resources": {"claims": [{"name": "gpus"}]}}],
                       "resourceClaims": [{"name": "gpus",
                                           "resourceClaimTemplateName": "a100s"}]}})
    await client.BatchV1Api(dra_api).create_namespaced_job(ns, body=job)
    await until(functools.partial(all_bound, dra_api, ns, "picky-", 2), within=90)
    for pod in await pods_of(dra_api, ns, "picky-"):
        assert pod["spec"]["nodeName"] == a100_node
        (claim,) = await claims_of(dra_api, ns, pod)
        assert {r["pool"] for r in allocated(claim, pod)} == {a100_node}


async def test_a_pod_whose_claim_selects_no_model_is_refused_naming_those_on_offer(
        dra_api: client.ApiClient, spaces: list[str], policy_file: PolicyFileFactory) -> None:
    (ns,) = spaces
    _models_policy(policy_file, ns)
    await create_template(dra_api, ns, "b200s", GPU_CLASS, 4,
                          selector=f'{PRODUCT} == "NVIDIA B200"')
    refusals: list[ApiException] = []

    async def refused() -> bool:
        # Until the webhook has seen the template and reloaded its policy, it says so.
        try:
            await client.CoreV1Api(dra_api).create_namespaced_pod(
                ns, body=gang_pod("b200", 0, 2, templates=("b200s",)), dry_run="All")
        except ApiException as e:
            refusals.append(e)
            return "NVIDIA B200" in (e.body or "")
        return False

    await until(refused, within=30)
    message = refusals[-1].body or ""
    assert f"a100 (productName={A100})" in message
    assert f"h100 (productName={H100})" in message


async def test_a_queue_of_a_model_named_by_product_name_runs_there_up_to_its_quota(
        dra_api: client.ApiClient, spaces: list[str], dra_controllers: Controllers,
        policy_file: PolicyFileFactory, dra_sandbox: WiredPlane,
        session_policies: Path) -> None:
    (ns,) = spaces
    policy_file("93-dra-models.yaml", policy_yaml("e2e-dra-models", {
        "gpuModels": [{"name": "h100",
                       "deviceAttributes": {"productName": "NVIDIA H100 80GB HBM3"}}],
        "queues": [{"name": "by-product", "namespaces": [ns], "models": [
            {"model": "h100", "nominal": 8, "borrowingLimit": 0}]}]}))
    dra_controllers.start()
    core = client.CoreV1Api(dra_api)
    # A queue that lists models runs only on their nodes: this gang lands only if the
    # controller tells the nodes' model from their slices.
    await core.create_namespaced_pod(ns, body=gang_pod("first", 0, 1, templates=(EIGHT,)))
    await until(lambda: all_bound(dra_api, ns, "first-", 1), within=90)
    await core.create_namespaced_pod(ns, body=gang_pod("second", 0, 1, templates=(EIGHT,)))

    async def over_quota() -> bool:
        status = await airlock_status(dra_sandbox.plane.admin_kubeconfig, session_policies)
        return any(g["gang"] == f"{ns}/second" and g["reason"] == "OverQuota"
                   and "h100" in g["why"] for g in status["waiting"])

    await until(over_quota, within=60)
    assert all(gated(p) for p in await pods_of(dra_api, ns, "second-"))
    status = await airlock_status(dra_sandbox.plane.admin_kubeconfig, session_policies)
    assert "h100" not in status["modelsWithoutNodes"]
    assert {(m["queue"], m["model"], m["used"]) for m in status["models"]} >= {
        ("by-product", "h100", 8)}
