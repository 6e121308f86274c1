"""The crash test, at random moments: the controller is SIGKILLed while it lifts several
gangs (patches slowed so a lift takes seconds), restarted, and the cluster must settle
consistent: every gang wholly gated, or wholly let go into one domain, and no node holds
more GPUs than it has. The cluster: 8 nodes of 8 GPUs in 2 NVLink domains; three gangs of
4 whole nodes compete, so exactly two can run."""

from __future__ import annotations

import asyncio
import random
import signal

import pytest
from kubernetes_asyncio import client

from tests.kube import (
    GPUS_PER_NODE,
    Controllers,
    create_gang,
    gated,
    nodes_by_name,
    pods_of,
    until,
)

CLIQUE = "nvidia.com/gpu.clique"
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
        assert len({nodes[p["spec"]["nodeName"]][CLIQUE] for p in pods}) == 1, gang
        for p in pods:
            used[p["spec"]["nodeName"]] = used.get(p["spec"]["nodeName"], 0) + GPUS_PER_NODE
    assert len(running) == 2, "both domains are used, and only by whole gangs"
    assert max(used.values()) <= GPUS_PER_NODE
