"""Gangs of other shapes, made by the real Job controller from indexed Jobs and placed by
the real kube-scheduler: a sliced gang (the whole gang in one block, each slice of it in
one NVLink domain of that block) and an elastic gang (running once its minimum fits,
growing as room frees). The cluster: block-0, NVLink domains clique-0 (gpu-0000..3) and
clique-1 (gpu-0004..7), 8 GPUs a node; the slice test adds a second block."""

from __future__ import annotations

from collections import Counter
from typing import Any

from kubernetes_asyncio import client

from tests.builders import indexed_job
from tests.kube import (
    Controllers,
    NodeFactory,
    all_bound,
    create_gang,
    events,
    gated,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.keys import (
    GANG_MIN_SIZE_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
)
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, Shape, node_manifest

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"


def second_block() -> list[dict[str, Any]]:
    """block-1: two NVLink domains of 4 nodes, named apart from the plane's own."""
    shape = Shape()
    return [node_manifest(f"blk1-{d}-{n}", 8, {CLIQUE_LABEL: f"clique-b1-{d}",
                                               BLOCK_LABEL: "block-1"},
                          shape.product, shape.taint_gpus)
            for d in range(2) for n in range(4)]


async def where(api: client.ApiClient, ns: str, prefix: str) -> dict[str, dict[str, str]]:
    """Each pod's node's labels, by the pod's completion index."""
    nodes = await nodes_by_name(api)
    return {p["metadata"]["labels"][COMPLETION_INDEX]: nodes[p["spec"]["nodeName"]]
            for p in await pods_of(api, ns, prefix)}


async def test_a_sliced_gang_lands_one_slice_in_each_nvlink_domain_of_the_free_block(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        extra_nodes: NodeFactory) -> None:
    controllers.start()
    # block-0 full: a gang in each of its NVLink domains.
    await create_gang(api, namespace, "fill-a", 4, cls="training")
    await until(lambda: all_bound(api, namespace, "fill-a", 4))
    await create_gang(api, namespace, "fill-b", 4, cls="training")
    await until(lambda: all_bound(api, namespace, "fill-b", 4))
    await extra_nodes(second_block())
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=indexed_job(
        "sliced", 6, {REQUIRED_TOPOLOGY_ANNOTATION: "block",
                      SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "nvlink",
                      SLICE_SIZE_ANNOTATION: "3"}))

    await until(lambda: all_bound(api, namespace, "sliced", 6), within=60)
    placed = await where(api, namespace, "sliced")
    assert {labels[BLOCK_LABEL] for labels in placed.values()} == {"block-1"}
    # 3 + 3, each slice (completion indexes 0-2, 3-5) inside one domain: the scheduler
    # alone, filling the block's nodes in turn, would put 4 in one domain and 2 in the other.
    assert Counter(labels[CLIQUE_LABEL] for labels in placed.values()) == \
        {"clique-b1-0": 3, "clique-b1-1": 3}
    for first in (0, 3):
        assert len({placed[str(i)][CLIQUE_LABEL] for i in range(first, first + 3)}) == 1
    for p in await pods_of(api, namespace, "sliced"):
        assert set(p["spec"]["nodeSelector"]) == {BLOCK_LABEL, CLIQUE_LABEL}


async def test_an_elastic_gang_runs_what_fits_and_grows_as_a_node_frees(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    controllers.start()
    # clique-0 full, one node of clique-1 busy: 3 nodes free, all in clique-1.
    await create_gang(api, namespace, "fill", 4, cls="training")
    await until(lambda: all_bound(api, namespace, "fill", 4))
    await create_gang(api, namespace, "one", 1, cls="training")
    await until(lambda: all_bound(api, namespace, "one", 1))
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=indexed_job(
        "elastic", 4, {GANG_MIN_SIZE_ANNOTATION: "2"}))

    async def three_running() -> bool:
        pods = await pods_of(api, namespace, "elastic")
        return len(pods) == 4 and sum(bool(p["spec"].get("nodeName")) for p in pods) == 3

    await until(three_running, within=60)
    (waiting,) = [p for p in await pods_of(api, namespace, "elastic")
                  if not p["spec"].get("nodeName")]
    assert gated(waiting)

    async def told_growing() -> bool:
        # Said by the round after the three were let go, which may end after they bind.
        return any(e.startswith("Waiting: 1 pods above the gang's minimum of 2")
                   for e in await events(api, namespace, "elastic"))

    await until(told_growing, within=30)

    await client.CoreV1Api(api).delete_namespaced_pod("one-0", namespace,
                                                      grace_period_seconds=0)
    await until(lambda: all_bound(api, namespace, "elastic", 4), within=60)
    placed = await where(api, namespace, "elastic")
    assert {labels[CLIQUE_LABEL] for labels in placed.values()} == {"clique-1"}
