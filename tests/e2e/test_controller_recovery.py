"""The crash test, at random moments: the controller is SIGKILLed while it lifts several
gangs (patches slowed so a lift takes seconds), restarted, and the cluster must settle
consistent: every gang wholly gated, or wholly let go into one domain, and no node holds
more GPUs than it has. The cluster: 8 nodes of 8 GPUs in 2 NVLink domains; three gangs of
4 whole nodes compete, so exactly two can run. And what the leader remembers outlives
it: a gang short of members keeps the time it became short across a restart."""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time

import pytest
from kubernetes_asyncio import client

from tests.builders import policy_yaml
from tests.kube import (
    GPUS_PER_NODE,
    Controllers,
    PolicyFileFactory,
    all_bound,
    create_gang,
    events,
    gated,
    nodes_by_name,
    pods_of,
    until,
)
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY, SHORT_SINCE_KEY
from webhook.controller.shells.remembering import recall
from webhook.keys import SYSTEM_NAMESPACE
from webhook.sandbox.nodes import CLIQUE_LABEL

GANGS = ("alpha", "beta", "gamma")


async def _settled(api: client.ApiClient, ns: str) -> bool:
    """Every gang is whole one way or the other: all gated, or all bound."""
    for gang in GANGS:
        pods = await pods_of(api, ns, gang)
        if len(pods) != 4:
            return False
        if not (all(gated(p) for p in pods) or all(p["spec"].get("nodeName") for p in pods)):
            return False
    return True


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_killed_at_a_random_moment_the_cluster_settles_consistent(
        api: client.ApiClient, namespace: str, controllers: Controllers, seed: int) -> None:
    rng = random.Random(seed)
    slow = controllers.start("--patch-pause", "0.4")
    await asyncio.gather(*(create_gang(api, namespace, g, 4) for g in GANGS))
    # A lift of 4 pods takes about 1.6 s here: kill anywhere from before the first
    # decision to after the last patch.
    await asyncio.sleep(rng.uniform(0.2, 3.0))
    slow.process.send_signal(signal.SIGKILL)
    slow.process.wait()
    at_kill = [sum(not gated(p) for p in await pods_of(api, namespace, g)) for g in GANGS]
    print(f"seed {seed}: pods let go per gang when killed: {at_kill}")
    controllers.start()

    async def settled() -> bool:
        # Whole one way or the other, and done: before the new leader's first decision
        # every gang is whole too (all gated), so wait for the two that fit to be bound.
        if not await _settled(api, namespace):
            return False
        bound = [g for g in GANGS if not gated((await pods_of(api, namespace, g))[0])]
        return len(bound) == 2

    await until(settled, within=60)
    await asyncio.sleep(3)  # and it stays so
    assert await _settled(api, namespace)
    nodes = await nodes_by_name(api)
    used: dict[str, int] = {}
    running = []
    for gang in GANGS:
        pods = await pods_of(api, namespace, gang)
        if gated(pods[0]):
            continue
        running.append(gang)
        assert len({nodes[p["spec"]["nodeName"]][CLIQUE_LABEL] for p in pods}) == 1, gang
        for p in pods:
            used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + GPUS_PER_NODE
    assert len(running) == 2, "both domains are used, and only by whole gangs"
    assert max(used.values()) <= GPUS_PER_NODE


async def _kept(api: client.ApiClient) -> dict[str, str]:
    return await recall(client.CoreV1Api(api), SYSTEM_NAMESPACE)


async def test_a_gang_short_of_members_keeps_its_time_across_a_restart(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    grace = 45
    policy_file("90-short-grace.yaml", policy_yaml(
        "short-grace", {"preemption": {"staleGangGracePeriod": f"{grace}s"}}))
    first = controllers.start()
    await create_gang(api, namespace, "g", 2)

    await until(lambda: all_bound(api, namespace, "g", 2), within=60)
    # A member is lost and nothing replaces it: nothing is gated, yet the leader notices.
    await client.CoreV1Api(api).delete_namespaced_pod("g-1", namespace, grace_period_seconds=0)
    gang = f"{namespace}/g"
    kept: dict[str, float] = {}

    async def noticed() -> bool:
        shortfalls = json.loads((await _kept(api)).get(SHORT_SINCE_KEY, "{}"))
        kept.update(shortfalls.get("gangs", {}).get(gang, {}))
        return bool(kept)

    await until(noticed, within=30)
    first.process.send_signal(signal.SIGKILL)
    first.process.wait()
    restarted = time.time()
    controllers.start()

    async def rewritten() -> bool:
        # The new leader has sampled and written what it keeps.
        at: float = json.loads((await _kept(api)).get(FAIR_SHARE_KEY, '{"at": 0}'))["at"]
        return at > restarted

    await until(rewritten, within=60)
    # It writes at its first sample, before its first round could requeue anything.
    carried = json.loads((await _kept(api))[SHORT_SINCE_KEY])["gangs"].get(gang)
    assert carried == kept, "the new leader carries on the time, not its own start"

    async def requeued() -> bool:
        return any(m.startswith("Requeued: the gang has 1 of its 2 members")
                   for m in await events(api, namespace, "g-0"))

    await until(requeued, within=grace + 60)
