"""GPU models on a mixed cluster: the shared plane's H100 nodes and two A100 nodes added
for the test, told apart by GPU feature discovery's product label. A queue with quotas per
model takes H100s up to its quota, then A100s; each gang lands whole on one model, pinned
there at ungate, and placed by the real kube-scheduler."""

from __future__ import annotations

from kubernetes_asyncio import client

from tests.builders import PRODUCT, PRODUCTS, policy_yaml
from tests.kube import (
    Controllers,
    NodeFactory,
    PolicyFileFactory,
    all_bound,
    create_gang,
    nodes_by_name,
    pods_of,
    until,
)
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
