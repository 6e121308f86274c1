"""A short soak on the real control plane (`bench.soak`, the same driver and checker
as `python -m bench.soak`): the controller is SIGKILLed at seeded random moments while it
admits, preempts and reclaims, with queued singles and a gang asking for room with
placeholders, and started again; afterwards no gang is half-evicted, every victim's
preemptor was admitted next (by the controller that decided or the next one), no node
was over-committed, every eviction has its event, no gang was half placed, no pod was
stored unmarked, the kept fair share never went back, and no placeholder outlived its
gang. (The restarts of the apiserver, etcd and the webhook are `python -m bench.soak
--restarts`'s: this plane is shared with the other tests.)"""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from bench.soak.driving import PATCH_PAUSE, Namespaces, Soak, policy
from tests.kube import Controllers, NamespaceFactory, PolicyFileFactory


@pytest.mark.parametrize("seed", [7])
async def test_killed_while_it_preempts_and_reclaims_no_invariant_breaks(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory, seed: int) -> None:
    spaces = Namespaces(await namespaces(), await namespaces(), await namespaces(),
                        await namespaces())
    policy_file("90-soak.yaml", policy(spaces))
    found = await Soak(api, spaces, lambda: controllers.start("--patch-pause", PATCH_PAUSE),
                       kills=5, seed=seed).run()
    print(found.text())
    assert found.kills == 5  # four a wave: two waves
    # Two waves: two preemptions and two reclaims, each of whole gangs.
    assert found.preemptions == 4
    assert found.victims == 2 * (4 + 2)
    assert found.reclaimed == 2 * 2
    assert found.clean, found.text()
