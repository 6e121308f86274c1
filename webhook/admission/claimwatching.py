"""The ResourceClaims and ResourceClaimTemplates of every namespace, as watches keep them:
what the webhook looks a pod's claims up in, so that a review never waits on a call to
the apiserver. A claim a review names that the cache has not seen is waited for a moment
(the watch is usually milliseconds behind the object's creation), then reported unknown.

On a cluster that does not serve `resource.k8s.io/v1` (before Kubernetes 1.34, or DRA
turned off) there are no claims to read: pods are then judged without theirs, as with
`--dra none`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.admission.claiming import ClaimKey, Claims, entry
from webhook.devices.claims import Ask, ClaimKind
from webhook.kubewatch import watch
from webhook.reach import credentials

log = logging.getLogger("airlock.claims")

# How long a review waits for a claim the watch has not brought yet.
WAIT_SECONDS = 0.25

_Entry = tuple[str, ClaimKey, tuple[Ask, ...]]


class ClaimCache:
    def __init__(self, api: client.ApiClient, wait: float = WAIT_SECONDS) -> None:
        self.api = api
        self.wait = wait
        self._asks: dict[tuple[str, ClaimKey], tuple[Ask, ...]] = {}
        self._listed: set[ClaimKind] = set()
        self._changed = asyncio.Event()
        # False once the apiserver said it serves no resource.k8s.io/v1.
        self.served = True

    def problem(self) -> str | None:
        """Why reviews cannot look claims up yet (for readiness)."""
        if self.served and len(self._listed) < 2:
            return "DRA claims and claim templates not listed yet"
        return None

    async def run(self) -> None:
        resource = client.ResourceV1Api(self.api)
        listers: list[tuple[ClaimKind, Callable[..., Awaitable[Any]]]] = [
            ("ResourceClaimTemplate", resource.list_resource_claim_template_for_all_namespaces),
            ("ResourceClaim", resource.list_resource_claim_for_all_namespaces)]
        if not await self._served(listers[0][1]):
            return
        await asyncio.gather(*(watch(kind, lister, self._parser(kind), self._on_list(kind),
                                     self._on_event(kind)) for kind, lister in listers))

    async def _served(self, lister: Callable[..., Awaitable[Any]]) -> bool:
        try:
            await lister(limit=1)
        except ApiException as e:
            if e.status == 404:
                self.served = False
                log.warning("the apiserver serves no resource.k8s.io/v1: pods are judged "
                            "without their DRA claims")
                return False
        return True

    def _parser(self, kind: ClaimKind) -> Callable[[dict[str, Any]], _Entry | None]:
        return lambda obj: entry(obj, kind)

    def _on_list(self, kind: ClaimKind) -> Callable[[list[Any]], None]:
        def listed(items: list[_Entry | None]) -> None:
            for key in [k for k in self._asks if k[1][0] == kind]:
                del self._asks[key]
            self._put(e for e in items if e is not None)
            self._listed.add(kind)
        return listed

    def _on_event(self, kind: ClaimKind) -> Callable[[str, dict[str, Any]], None]:
        def event(change: str, obj: dict[str, Any]) -> None:
            found = entry(obj, kind)
            if found is None:
                return
            if change == "DELETED":
                self._asks.pop((found[0], found[1]), None)
            else:
                self._put((found,))
        return event

    def _put(self, entries: Iterable[_Entry]) -> None:
        for namespace, key, asks in entries:
            self._asks[namespace, key] = asks
        # Wake the reviews waiting for a claim; later ones wait on a fresh event.
        self._changed.set()
        self._changed = asyncio.Event()

    async def lookup(self, namespace: str, keys: list[ClaimKey], until: float
                     ) -> Claims | None:
        """What the claims ask for, of those seen within the wait, and never past `until`
        (the review's budget, on the monotonic clock); None where claims cannot be read at
        all (the cluster serves no DRA)."""
        if not self.served:
            return None
        deadline = min(time.monotonic() + self.wait, until)
        while True:
            found = {k: a for k in keys if (a := self._asks.get((namespace, k))) is not None}
            left = deadline - time.monotonic()
            if len(found) == len(keys) or left <= 0:
                return found
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._changed.wait(), left)


async def open_claims(kubeconfig: Path | None) -> ClaimCache:
    """A cache with a client of its own (closed with the server)."""
    from webhook import kubeclient

    configuration = await credentials(
        kubeconfig, "--dra kubernetes reads pods' ResourceClaims and ResourceClaimTemplates",
        "--dra none")
    return ClaimCache(kubeclient.api_client(configuration, in_flight=4))
