"""Leader election with a fence: writes happen only while this replica's hold on the
Lease is known to be fresh.

`kubernetes_asyncio.leaderelection` stops the leader when a renewal fails, but a renewal
request that hangs (an apiserver that stopped answering) can outlast the Lease, and then
a second replica takes over while the first still writes. So every write first asks the
fence: the last successful renewal must be younger than the renew deadline, which is
shorter than the Lease, so the two replicas never write in the same moment.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes_asyncio.leaderelection.resourcelock.leaselock import LeaseLock

LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2


class NotLeading(Exception):
    """A write was refused: this replica's hold on the Lease may have lapsed."""


class Fence:
    def __init__(self, fresh_for: float | None) -> None:
        # None: no election (one replica by configuration), always fresh.
        self.fresh_for = fresh_for
        self.renewed_at = float("-inf")

    def renewed(self, started: float) -> None:
        self.renewed_at = max(self.renewed_at, started)

    def check(self) -> None:
        if self.fresh_for is not None and time.monotonic() - self.renewed_at > self.fresh_for:
            raise NotLeading("the Lease was not renewed in time; not writing")


class FencedLeaseLock(LeaseLock):  # type: ignore[misc]
    """A LeaseLock that tells the fence when it created or renewed the Lease (timed
    from the start of the request: the conservative end)."""

    def __init__(self, name: str, namespace: str, identity: str, api_client: Any,
                 fence: Fence) -> None:
        super().__init__(name, namespace, identity, api_client)
        self.fence = fence

    async def create(self, name: str, namespace: str, election_record: Any) -> bool:
        started = time.monotonic()
        ok: bool = await super().create(name, namespace, election_record)
        if ok:
            self.fence.renewed(started)
        return ok

    async def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        started = time.monotonic()
        ok: bool = await super().update(name, namespace, updated_record)
        if ok:
            self.fence.renewed(started)
        return ok
