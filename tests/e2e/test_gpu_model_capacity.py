"""Capacity requests per GPU model, on the mixed Karpenter sandbox (`sandbox up --pools
h100=1x8,a100=1x8 --autoscaler karpenter`): a node of each model, and the real Karpenter
(its kwok provider) with a NodePool per pool whose nodes carry GPU feature discovery's
labels. A gang of A100s too big for the A100 node asks for room; the placeholders select
its model's labels and NodePool, so Karpenter grows the A100 pool and no other. Without
them Karpenter takes the first NodePool that fits the pods (among equal weights and
prices, h100), and the gang, pinned to A100, would never get in."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import PRODUCT, PRODUCTS, indexed_job, policy_yaml
from tests.kube import (
    Controllers,
    PolicyFileFactory,
    WiredPlane,
    all_bound,
    fresh_namespaces,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.operators.karpenter.keys import NODE_POOL_LABEL
from webhook.sandbox.clients import from_kubeconfig


@pytest.fixture
async def grow_api(pools_karpenter_plane: WiredPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(
            pools_karpenter_plane.plane.admin_kubeconfig) as api_client:
        yield api_client


@pytest.fixture
def grow_controllers(pools_karpenter_plane: WiredPlane, tmp_path: Path,
                     session_policies: Path) -> Iterator[Controllers]:
    with pools_karpenter_plane.controllers(tmp_path, session_policies) as running:
        yield running


async def _node_claims(api: client.ApiClient) -> list[dict[str, Any]]:
    found = await client.CustomObjectsApi(api).list_cluster_custom_object(
        "karpenter.sh", "v1", "nodeclaims")
    items: list[dict[str, Any]] = found["items"]
    return items


async def test_a_capacity_request_grows_the_pool_of_the_gangs_model_only(
        grow_api: client.ApiClient, grow_controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    async with fresh_namespaces(grow_api) as make:
        ns = await make()
        policy_file("92-capacity.yaml", policy_yaml("capacity-per-model", {
            "capacity": {"mode": "placeholders", "timeout": "5m", "backoff": "1m"},
            "gpuModels": [
                {"name": "h100", "nodeLabels": {PRODUCT: PRODUCTS["h100"]}},
                {"name": "a100", "nodeLabels": {PRODUCT: PRODUCTS["a100"]},
                 "nodePool": "a100"}],
            "queues": [{"name": "growing", "namespaces": [ns], "models": [
                {"model": "h100", "nominal": 64}, {"model": "a100", "nominal": 64}]}]}))
        grow_controllers.start()
        # Two 8-GPU workers in one NVLink domain: more than the one A100 node holds.
        await client.BatchV1Api(grow_api).create_namespaced_job(ns, body=indexed_job(
            "big", 2, {GPU_MODELS_ANNOTATION: "a100"}))
        await until(functools.partial(all_bound, grow_api, ns, "big", 2), within=240)

        nodes = await nodes_by_name(grow_api)
        landed = {nodes[p["spec"]["nodeName"]][PRODUCT]
                  for p in await pods_of(grow_api, ns, "big")}
        assert landed == {PRODUCTS["a100"]}
        claims = await _node_claims(grow_api)
        assert claims
        assert {c["metadata"]["labels"][NODE_POOL_LABEL] for c in claims} == {"a100"}
        assert not [n for n, labels in nodes.items()
                    if labels.get(PRODUCT) == PRODUCTS["h100"]
                    and labels.get(NODE_POOL_LABEL)]
