"""Capacity requests carried out: placeholder pods made and removed as `growing`
decided, each side by side, the gangs' pods told (docs/autoscaling.md). A placeholder
that is already there, or already gone, is what was wanted: no error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Sequence

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.growth.asking import CapacitySettings, Growth, events_of
from webhook.controller.core.growth.placeholders import manifest, requested, too_small
from webhook.controller.core.identities import UnitId
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.shells.applying import Applier
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.keys import SYSTEM_NAMESPACE
from webhook.kuberaw import json_of
from webhook.policy.gpumodels import GpuModel

log = logging.getLogger("airlock.controller")


class Placeholding:
    def __init__(self, api: client.ApiClient, applier: Applier,
                 metrics: ControllerMetrics) -> None:
        self.core = client.CoreV1Api(api)
        self.applier = applier
        self.metrics = metrics
        # When each unit's last request expired: it asks again after the backoff. Kept in
        # memory: a new leader may ask once more at once, which costs nothing but a try.
        self.failed: dict[UnitId, float] = {}

    async def apply(self, growth: Growth, settings: CapacitySettings,
                    nodes: Iterable[NodeInfo], models: Sequence[GpuModel] = ()) -> None:
        self.failed = dict(growth.backing_off)
        # Removed first: the gang they stood for may be lifted into their room next.
        await asyncio.gather(*(self._delete(name) for r in growth.release
                               for name in r.names))
        nodes = list(nodes) if growth.make else []
        await asyncio.gather(*(self._create(manifest(r.unit, pod, i, _avoid(nodes, r.pods),
                                                     requested(models, r.model)))
                               for r in growth.make for i, pod in enumerate(r.pods)))
        for request in growth.make:
            self.metrics.capacity_requests.labels("requested").inc()
            log.info("capacity requested", extra={"gang": str(request.unit),
                                                   "pods": len(request.pods)})
        for release in growth.release:
            self.metrics.capacity_requests.labels(release.ending).inc()
            log.info("capacity request ended", extra={"gang": str(release.unit),
                                                      "ending": release.ending})
        self.applier.tell(events_of(growth, settings, "a placeholder pod for each"))

    async def _create(self, body: dict[str, object]) -> None:
        try:
            await json_of(await self.core.create_namespaced_pod(
                SYSTEM_NAMESPACE, body=body, _preload_content=False))
        except ApiException as e:
            if e.status != 409:
                log.warning("could not make a placeholder; the next round retries",
                            extra={"status": e.status, "reason": e.reason})

    async def _delete(self, name: str) -> None:
        try:
            await json_of(await self.core.delete_namespaced_pod(
                name, SYSTEM_NAMESPACE, grace_period_seconds=0, _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                log.warning("could not remove a placeholder; the next round retries",
                            extra={"status": e.status, "reason": e.reason})


def _avoid(nodes: list[NodeInfo], pods: tuple[PodInfo, ...]) -> list[str]:
    key = pods[0].marks.topology_key if pods else None
    return too_small(nodes, key, pods) if key else []
