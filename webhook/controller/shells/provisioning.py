"""ProvisioningRequests carried out (`spec.capacity.mode: provisioningRequest`): made and
removed as `growing` decided, with their pod templates; and the gangs lifted into the
room one booked carry the annotations that consume it (docs/autoscaling.md). A request
already there, or already gone, is what was wanted: no error."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.actions import Action, Admit
from webhook.controller.core.growth.asking import Asking, CapacitySettings, Growth, events_of
from webhook.controller.core.growth.placeholders import digest, requested, too_small
from webhook.controller.core.growth.provisioning import (
    class_for,
    consuming,
    objects,
    request_name,
)
from webhook.controller.core.identities import UnitId
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.shells.applying import Applier
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.keys import PLACEHOLDER_LABEL
from webhook.kuberaw import json_of
from webhook.operators.clusterautoscaler.keys import GROUP, PLURAL, VERSION
from webhook.policy.gpumodels import GpuModel

log = logging.getLogger("airlock.controller")


class Provisioning:
    def __init__(self, api: client.ApiClient, applier: Applier,
                 metrics: ControllerMetrics) -> None:
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self.applier = applier
        self.metrics = metrics
        # As placeholding's: when each unit's last request failed or expired.
        self.failed: dict[UnitId, float] = {}
        # Units admitted into the room their request booked: the request stays until
        # the next round, so the pods lifted now may still consume it.
        self._kept: set[UnitId] = set()

    @staticmethod
    def consume(actions: list[Action], open_units: Iterable[UnitId],
                provisioning_class: str, models: Sequence[GpuModel] = ()) -> list[Action]:
        """The round's admissions of gangs with a request open, writing the annotations
        that have their pods consume what it booked (of their model's class)."""
        asked = set(open_units)
        return [dataclasses.replace(a, annotations=consuming(a.unit, class_for(
            models, a.record.model, provisioning_class)))
                if isinstance(a, Admit) and a.unit in asked else a for a in actions]

    async def apply(self, growth: Growth, settings: CapacitySettings,
                    nodes: Iterable[NodeInfo], provisioning_class: str,
                    models: Sequence[GpuModel] = ()) -> None:
        self.failed = dict(growth.backing_off)
        ended = [r for r in growth.release if r.ending != "provisioned"]
        await asyncio.gather(*(self._delete(r.unit) for r in ended))
        nodes = list(nodes) if growth.make else []
        for request in growth.make:
            key = request.pods[0].marks.topology_key
            avoid = too_small(nodes, key, request.pods) if key else []
            for obj in objects(request.unit, request.pods,
                               class_for(models, request.model, provisioning_class), avoid,
                               requested(models, request.model)):
                await self._create(obj)
            self.metrics.capacity_requests.labels("requested").inc()
            log.info("capacity requested", extra={"gang": str(request.unit),
                                                   "pods": len(request.pods)})
        for release in growth.release:
            if release.unit in self._kept and release.ending == "withdrawn":
                self._kept.discard(release.unit)  # told already, as provisioned
                continue
            if release.ending == "provisioned":
                self._kept.add(release.unit)
            self.metrics.capacity_requests.labels(release.ending).inc()
            log.info("capacity request ended", extra={"gang": str(release.unit),
                                                      "ending": release.ending,
                                                      "why": release.why})
        self.applier.tell(events_of(growth, settings, "a ProvisioningRequest"))

    async def _create(self, obj: dict[str, Any]) -> None:
        ns = obj["metadata"]["namespace"]
        try:
            if obj["kind"] == "PodTemplate":
                await json_of(await self.core.create_namespaced_pod_template(
                    ns, body=obj, _preload_content=False))
            else:
                await json_of(await self.custom.create_namespaced_custom_object(
                    GROUP, VERSION, ns, PLURAL, obj, _preload_content=False))
        except ApiException as e:
            if e.status != 409:
                log.warning("could not make a capacity request; the next round retries",
                            extra={"status": e.status, "reason": e.reason})

    async def _delete(self, unit: UnitId) -> None:
        """The unit's request, and its pod templates (by the label they share)."""
        try:
            await json_of(await self.custom.delete_namespaced_custom_object(
                GROUP, VERSION, unit.namespace, PLURAL, request_name(unit),
                _preload_content=False))
            await json_of(await self.core.delete_collection_namespaced_pod_template(
                unit.namespace, label_selector=f"{PLACEHOLDER_LABEL}={digest(unit)}",
                _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                log.warning("could not remove a capacity request; the next round retries",
                            extra={"status": e.status, "reason": e.reason})


def open_units(requests: Iterable[Asking]) -> set[UnitId]:
    return {r.unit for r in requests}
