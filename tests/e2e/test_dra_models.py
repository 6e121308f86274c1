"""GPU models told apart by DRA device attributes, on the DRA sandbox: its nodes' GPUs
are H100s by the `productName` their ResourceSlices publish. A queue that may use only
that model runs a gang there up to its quota, and the next waits over quota of it."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client

from tests.builders import gang_pod, policy_yaml
from tests.kube import (
    EIGHT,
    Controllers,
    PolicyFileFactory,
    WiredPlane,
    airlock_status,
    all_bound,
    gated,
    pods_of,
    until,
)


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
