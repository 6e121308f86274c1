"""The leader's fence: no write unless the Lease was renewed within the renew deadline."""

from __future__ import annotations

import time
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.leaderelection.leaderelectionrecord import LeaderElectionRecord

from tests.builders import NOW, SEAL, cluster, gang, tracked
from webhook.controller.core.deciding import decide
from webhook.controller.shells.applying import Applier
from webhook.controller.shells.leading import Fence, FencedLeaseLock, NotLeading


def test_without_election_the_fence_is_always_open() -> None:
    Fence(None).check()


def test_the_fence_closes_when_the_renewal_is_old() -> None:
    fence = Fence(10.0)
    with pytest.raises(NotLeading):
        fence.check()  # never renewed
    fence.renewed(time.monotonic())
    fence.check()
    fence.renewed_at = time.monotonic() - 11
    with pytest.raises(NotLeading):
        fence.check()


class FakeLeases:
    def __init__(self, fail: bool) -> None:
        self.fail = fail

    async def create_namespaced_lease(self, *_args: Any, **_kwargs: Any) -> None:
        if self.fail:
            raise ApiException(status=409)

    async def replace_namespaced_lease(self, *_args: Any, **_kwargs: Any) -> None:
        if self.fail:
            raise ApiException(status=409)


@pytest.mark.parametrize("fail", [False, True])
async def test_only_a_successful_create_or_renewal_opens_the_fence(fail: bool) -> None:
    fence = Fence(10.0)
    async with client.ApiClient() as api:
        lock = FencedLeaseLock("airlock-controller", "airlock-system", "me", api, fence)
        lock.api_instance = FakeLeases(fail)
        record = LeaderElectionRecord("me", "15", "2026-01-01 00:00:00", "2026-01-01 00:00:00")
        assert await lock.create("airlock-controller", "airlock-system", record) is not fail
        lock.lease_reference = client.V1Lease(spec=client.V1LeaseSpec())
        assert await lock.update("airlock-controller", "airlock-system", record) is not fail
    if fail:
        with pytest.raises(NotLeading):
            fence.check()
    else:
        fence.check()


class RecordingPods:
    def __init__(self) -> None:
        self.patched: list[str] = []

    async def patch_namespaced_pod(self, name: str, *_args: Any, **_kwargs: Any) -> Any:
        self.patched.append(name)
        raise AssertionError("a fenced-off leader must not write")

    async def create_namespaced_event(self, *_args: Any, **_kwargs: Any) -> None:
        return None


async def test_a_lapsed_leader_applies_nothing() -> None:
    actions = decide(tracked(cluster({"a": 4}), gang("g", 2)), {}, NOW)
    assert actions
    async with client.ApiClient() as api:
        applier = Applier(api, lambda _: None, "me", SEAL, fence=Fence(10.0))
        pods = RecordingPods()
        applier.core = pods
        await applier.apply(actions)
    assert pods.patched == []
