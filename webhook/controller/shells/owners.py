"""Gang sizes that only the owner object knows (docs/admission.md's gang table), looked up with a
short-lived cache. The convention that found the gang says where its owner is and reads
the size off it; this module only does the GET. A kind that is not installed is an answer
(`SizeUnknown`), not a crash: the gang's pods get an event saying so."""

from __future__ import annotations

import time
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.gangs import SizeAnswer
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.conventions.base import Joins, OwnerAddress, SamePriority, SizeUnknown
from webhook.kuberaw import json_of
from webhook.operators.registry import owner_sized


class OwnerSizes:
    def __init__(self, api: client.ApiClient, ttl: float = 30.0) -> None:
        self.api = api
        self.ttl = ttl
        self._cache: dict[UnitId, tuple[float, SizeAnswer]] = {}

    def cached(self, gang: UnitId) -> SizeAnswer | None:
        hit = self._cache.get(gang)
        return hit[1] if hit and time.monotonic() - hit[0] < self.ttl else None

    async def lookup(self, gang: UnitId, pod: PodInfo, joins: Joins) -> SizeAnswer:
        """The gang's size: the owner's members whose pods `joins` (they need GPUs; the
        others are not gated, so the gang does not wait for them), as the convention reads
        it: with the fewest it may start with (`Elastic`) when the owner is elastic."""
        found = self.cached(gang)
        if found is None:
            found = await self._size(pod, joins)
            self._cache[gang] = (time.monotonic(), found)
        return found

    async def _size(self, pod: PodInfo, joins: Joins) -> SizeAnswer:
        convention = owner_sized(pod.marks.source or "")
        if convention is None:
            return SizeUnknown(f"gang source {pod.marks.source!r} states no owner to look up")
        where = convention.owner(pod.labels, pod.owners)
        if isinstance(where, SizeUnknown):
            return where
        owner = await self._get(where, pod.namespace)
        if isinstance(owner, SizeUnknown):
            return owner
        if isinstance(convention, SamePriority):
            problem = convention.priority_problem(owner, pod.priority)
            if problem:
                return SizeUnknown(problem)
        return convention.size(owner, pod.labels, joins)

    async def _get(self, where: OwnerAddress, ns: str) -> dict[str, Any] | SizeUnknown:
        # The generic path serves built-in kinds (batch/v1 jobs) as well as custom ones.
        try:
            return await json_of(await client.CustomObjectsApi(self.api)
                                 .get_namespaced_custom_object(
                                     where.group, where.version, ns, where.plural, where.name,
                                     _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return SizeUnknown(f"{where.kind} {ns}/{where.name} not found: the kind is "
                                   f"not installed or the object is gone")
            return SizeUnknown(f"cannot read the owner ({e.status} {e.reason})")
