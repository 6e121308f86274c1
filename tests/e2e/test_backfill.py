"""Backfill that never delays the head, on the real control plane: a gang behind the head
of the queue goes onto the room reserved for the head only when it is expected to end before
the head could start there. The cluster: 8 nodes of 8 GPUs, NVLink domains clique-0
(gpu-0000..3) and clique-1 (gpu-0004..7). Pods go through Airlock's webhook, which records
the run time each states (`gpu-airlock.io/expected-runtime`)."""

from __future__ import annotations

import asyncio
import json

from kubernetes_asyncio import client

from tests.builders import template, workload
from tests.kube import Controllers, all_bound, create_gang, events, gated, pods_of, until
from webhook.keys import EXPECTED_RUNTIME_ANNOTATION, PLACEMENT_ANNOTATION

CLIQUES = (("gpu-0000", "gpu-0001", "gpu-0002", "gpu-0003"),
           ("gpu-0004", "gpu-0005", "gpu-0006", "gpu-0007"))


def _expecting(runtime: str) -> dict[str, str]:
    return {EXPECTED_RUNTIME_ANNOTATION: runtime}


async def _waits(api: client.ApiClient, namespace: str, gang: str) -> bool:
    return any(e.startswith("Waiting: ") for e in await events(api, namespace, gang))


async def test_a_gang_that_would_delay_the_head_is_not_backfilled_one_that_ends_in_time_is(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    controllers.start()
    # An hour's work on three nodes of one domain, and work of no stated end on the whole
    # other: one node is free, in the domain that frees in an hour.
    await create_gang(api, namespace, "hour", 3, annotations=_expecting("1h"))
    await until(lambda: all_bound(api, namespace, "hour", 3))
    await create_gang(api, namespace, "wall", 4)
    await until(lambda: all_bound(api, namespace, "wall", 4))
    # The head needs a whole domain: it keeps the one that frees in an hour.
    await create_gang(api, namespace, "head", 4)
    await until(lambda: _waits(api, namespace, "head"))
    # Behind it, two gangs that fit only on the head's free node: one would still run
    # when the head could start, the other is done well before.
    await create_gang(api, namespace, "long", 1, annotations=_expecting("2h"))
    await until(lambda: _waits(api, namespace, "long"))
    await create_gang(api, namespace, "short", 1, annotations=_expecting("10m"))

    await until(lambda: all_bound(api, namespace, "short", 1))
    (short,) = await pods_of(api, namespace, "short")
    record = json.loads(short["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    assert record["backfilledUntil"] - record["at"] == 600
    await asyncio.sleep(2)
    assert all(gated(p) for p in await pods_of(api, namespace, "long"))
    assert all(gated(p) for p in await pods_of(api, namespace, "head"))


async def test_a_pod_admitted_beside_the_heads_room_is_kept_off_it_by_the_scheduler(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    """kube-scheduler knows nothing of the room reserved for the head: a queued pod Airlock
    admits elsewhere would land on any free node, the kept ones included (here two of
    the three free nodes are kept). The ungate patch keeps it off them. Pinned to its
    planned node (`--pin nodes`, the default), a Job's pod could not go there anyway:
    the fence is for pods Airlock pins to no node, as under `--pin domain`."""
    controllers.start("--pin", "domain")
    await create_gang(api, namespace, "three", 3)
    await until(lambda: all_bound(api, namespace, "three", 3))
    await create_gang(api, namespace, "two", 2)
    await until(lambda: all_bound(api, namespace, "two", 2))
    # The head needs a whole domain; it keeps the one with two free nodes.
    await create_gang(api, namespace, "head", 4)
    await until(lambda: _waits(api, namespace, "head"))
    on_three = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "three")}
    (home,) = (c for c in CLIQUES if on_three <= set(c))
    (kept,) = (c for c in CLIQUES if c != home)
    # A scavenger Job's pod: queued by the webhook, a gang of one to the controller.
    job = workload("batch/v1", "Job", "sweep", namespace, backoffLimit=0,
                   template=template(gpus=8, restartPolicy="Never"))
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=job)

    await until(lambda: all_bound(api, namespace, "sweep-", 1))
    (sweep,) = await pods_of(api, namespace, "sweep-")
    assert sweep["spec"]["nodeName"] == next(iter(set(home) - on_three))
    (term,) = sweep["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "NotIn",
                                    "values": [n]} for n in kept]
    assert all(gated(p) for p in await pods_of(api, namespace, "head"))


async def test_room_the_head_would_not_need_at_its_start_is_lent_to_a_gang_of_no_stated_end(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    """EASY's second rule. One domain: an hour's work on one node, half a node taken for
    as long as nobody knows, two nodes free; the other domain full. The head (3 pods of 8
    GPUs) keeps the first and could start there in an hour, on the three whole nodes: the
    half-taken node's free half it never needs, so a 4-GPU pod of no stated end runs
    there now, and nowhere else in the head's room."""
    controllers.start()
    await create_gang(api, namespace, "hour", 1, annotations=_expecting("1h"))
    await until(lambda: all_bound(api, namespace, "hour", 1))
    await create_gang(api, namespace, "half", 1, gpus=4)
    await until(lambda: all_bound(api, namespace, "half", 1))
    await create_gang(api, namespace, "wall", 4)
    await until(lambda: all_bound(api, namespace, "wall", 4))
    await create_gang(api, namespace, "head", 3)
    await until(lambda: _waits(api, namespace, "head"))
    (half,) = await pods_of(api, namespace, "half")
    await create_gang(api, namespace, "small", 1, gpus=4)

    await until(lambda: all_bound(api, namespace, "small", 1))
    (small,) = await pods_of(api, namespace, "small")
    assert small["spec"]["nodeName"] == half["spec"]["nodeName"]
    record = json.loads(small["metadata"]["annotations"][PLACEMENT_ANNOTATION])
    assert "backfilledUntil" not in record
    (home,) = (c for c in CLIQUES if half["spec"]["nodeName"] in c)
    assert sorted(record["fencedOff"]) == sorted(set(home) - {half["spec"]["nodeName"]})
    assert all(gated(p) for p in await pods_of(api, namespace, "head"))
