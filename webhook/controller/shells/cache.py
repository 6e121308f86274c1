"""What the watches have told us, tracked for the rounds (`Tracked`), plus our own writes
as they return."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.claiming import (
    ClaimEntry,
    DeviceIndex,
    SliceEntry,
    claim_entry,
)
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.growth.asking import Asking
from webhook.controller.core.growth.placeholders import placeholder_of
from webhook.controller.core.growth.provisioning import request_of
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.lifecycle import Lifecycle, LifeEvent, gpu_model
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo, unreadable
from webhook.controller.core.records import Opener
from webhook.controller.shells.lifecycling import tell
from webhook.devices.claims import ClaimKind
from webhook.devices.kinds import DeviceKind
from webhook.keys import SYSTEM_NAMESPACE
from webhook.policy.gpumodels import GpuModel, attributes_named

log = logging.getLogger("airlock.controller")


def _version(obj: dict[str, Any]) -> int:
    # Resource versions are opaque, but etcd's are increasing integers: enough to keep a
    # late watch event from rolling back what one of our own writes already returned.
    text = (obj.get("metadata") or {}).get("resourceVersion", "")
    return int(text) if text.isdigit() else 0


class Cache:
    def __init__(self, accelerators: Accelerators, seal: Opener,
                 kinds: Mapping[str, DeviceKind] | None = None) -> None:
        self.seal = seal
        self.cluster = Tracked(accelerators)
        self.devices = DeviceIndex(kinds or {})
        # Nodes as they report themselves, before what their DRA slices offer is added.
        self._bare: dict[str, NodeInfo] = {}
        self._versions: dict[PodKey, int] = {}
        # Pods sharing a claim with one just parsed: counted again once it is stored.
        self._recount: set[PodKey] = set()
        # The placeholder pods there are (capacity requests), by name; the
        # ProvisioningRequests the controller made, by `namespace/name`.
        self.placeholders: dict[str, Asking] = {}
        self.requests: dict[str, Asking] = {}
        self.changed = asyncio.Event()
        # Pods the watch could not read, ever: what the metrics export.
        self.unreadable = 0
        # Followed on every replica, so a new leader knows what runs; logged by the
        # leader alone, so each event is logged once.
        self.lifecycle = Lifecycle(lambda requests: self.cluster.accelerators.count(requests),
                                   self._model_of)
        self.telling = False

    @property
    def pods(self) -> dict[PodKey, PodInfo]:
        return self.cluster.pods

    @property
    def nodes(self) -> dict[str, NodeInfo]:
        return self.cluster.capacity.nodes

    @property
    def gated(self) -> set[PodKey]:
        """Gang members and queued single pods that still carry Airlock's gate: with
        none, a round has nothing to decide, however much else in the cluster changes."""
        return self.cluster.membership.gated

    def _model_of(self, node: str) -> str | None:
        info = self.nodes.get(node)
        return gpu_model(self.cluster.models.of_node.get(node), info.labels if info else {})

    def _put(self, info: PodInfo) -> None:
        self.cluster.put_pod(info)
        self._tell(self.lifecycle.put(info, time.time()))

    def _drop(self, key: PodKey) -> None:
        self.cluster.drop_pod(key)
        self._tell(self.lifecycle.drop(key, time.time()))

    def _tell(self, events: list[LifeEvent]) -> None:
        if self.telling:
            tell(events)

    def parse_pod(self, obj: dict[str, Any]) -> tuple[PodInfo, int]:
        try:
            return self._parse_pod(obj), _version(obj)
        except Exception as e:
            # Anyone who may create a pod writes what is read here: one the controller
            # cannot read is kept as such, never a watch that fails for everyone.
            log.warning("pod cannot be read; set aside as invalid", exc_info=True)
            self.unreadable += 1
            return unreadable(obj, f"{type(e).__name__}: {str(e)[:200]}"), _version(obj)

    def _parse_pod(self, obj: dict[str, Any]) -> PodInfo:
        info = PodInfo.parse(obj, self.seal)
        if info.namespace == SYSTEM_NAMESPACE:
            self._placeholder(info, obj)
        if (obj.get("spec") or {}).get("resourceClaims"):
            self._recount |= self.devices.pod_put(info.key, obj)
            claimed, models = self.devices.claimed(info.key), self.devices.models(info.key)
            if claimed or models is not None:
                info = info.with_claims(claimed, models)
        return info

    def _placeholder(self, info: PodInfo, obj: dict[str, Any]) -> None:
        placeholder = placeholder_of(obj) if info.active else None
        if placeholder is not None:
            self.placeholders[info.name] = placeholder
        else:
            self.placeholders.pop(info.name, None)

    # --- ProvisioningRequests ---------------------------------------------------------------

    @staticmethod
    def parse_request(obj: dict[str, Any]) -> tuple[str, Asking | None]:
        meta = obj.get("metadata") or {}
        return f"{meta.get('namespace', '')}/{meta.get('name', '')}", request_of(obj)

    def list_requests(self, listed: list[tuple[str, Asking | None]]) -> None:
        self.requests = {key: asking for key, asking in listed if asking is not None}
        self.changed.set()

    def request_event(self, kind: str, obj: dict[str, Any]) -> None:
        key, asking = self.parse_request(obj)
        if kind == "DELETED" or asking is None:
            self.requests.pop(key, None)
        else:
            self.requests[key] = asking
        self.changed.set()

    # --- DRA: claims, templates, slices --------------------------------------------------

    def _claims_changed(self, pods: Iterable[PodKey]) -> None:
        """Count the pods' claims again (a claim or template they name changed)."""
        for key in pods:
            info = self.cluster.pods.get(key)
            if info is not None:
                again = info.with_claims(self.devices.claimed(key), self.devices.models(key))
                if again != info:
                    self._put(again)
        self.changed.set()

    def _flush(self) -> None:
        if self._recount:
            pods, self._recount = self._recount, set()
            self._claims_changed(pods)

    def parse_claim(self, kind: ClaimKind) -> Callable[[dict[str, Any]], ClaimEntry]:
        return lambda obj: claim_entry(kind, obj)

    def list_claims(self, kind: ClaimKind) -> Callable[[list[ClaimEntry]], None]:
        def listed(entries: list[ClaimEntry]) -> None:
            self._claims_changed(self.devices.list_claims(kind, entries))
            self._equip(self.devices.take_touched())
        return listed

    def claim_event(self, kind: ClaimKind) -> Callable[[str, dict[str, Any]], None]:
        def event(change: str, obj: dict[str, Any]) -> None:
            entry = claim_entry(kind, obj)
            self._claims_changed(self.devices.drop_claim(entry) if change == "DELETED"
                                 else self.devices.put_claim(entry))
            self._equip(self.devices.take_touched())
        return event

    def parse_slice(self, obj: dict[str, Any]) -> SliceEntry:
        return self.devices.slice_entry(obj)

    def list_slices(self, listed: list[SliceEntry]) -> None:
        self._equip(self.devices.list_slices(listed))

    def slice_event(self, change: str, obj: dict[str, Any]) -> None:
        entry = self.devices.slice_entry(obj)
        node = self.devices.drop_slice(entry) if change == "DELETED" \
            else self.devices.put_slice(entry)
        if node is not None:
            self._equip((node,))

    def _equip(self, nodes: Iterable[str]) -> None:
        """Count again what the nodes offer, their slices' devices included."""
        for name in nodes:
            bare = self._bare.get(name)
            if bare is not None:
                self.cluster.put_node(self._equipped(bare))
        self.changed.set()

    def _equipped(self, bare: NodeInfo) -> NodeInfo:
        offers = self.devices.supply.get(bare.name)
        attributes = self.devices.attributes.get(bare.name)
        if not offers and not attributes:
            return bare
        return dataclasses.replace(bare, allocatable={**bare.allocatable, **(offers or {})},
                                   devices=attributes or {})

    def count_devices_as(self, kinds: Mapping[str, DeviceKind],
                         models: Sequence[GpuModel] = ()) -> bool:
        """Count DRA devices by the policy's current DeviceClasses, and read the GPU
        attributes its `models` are told apart by; whether either changed (then what
        slices offer must be listed again)."""
        models, wanted = tuple(models), attributes_named(models)
        recount = kinds != self.devices.kinds or wanted != self.devices.wanted
        if kinds != self.devices.kinds or models != self.devices.gpu_models:
            # What pods' claims ask for, and the models their selectors name.
            self.devices.kinds, self.devices.gpu_models = kinds, models
            self._claims_changed(self.devices.claiming())
        if not recount:
            return False
        self.devices.wanted = wanted
        return True

    def list_pods(self, listed: list[tuple[PodInfo, int]]) -> None:
        listed_keys = {info.key for info, _ in listed}
        for key in [k for k in self.cluster.pods if k not in listed_keys]:
            self._drop(key)
            self._recount |= self.devices.pod_dropped(key)
        for info, _ in listed:
            self._put(info)
        self.placeholders = {name: p for name, p in self.placeholders.items()
                             if PodKey(SYSTEM_NAMESPACE, name) in listed_keys}
        self._versions = {info.key: version for info, version in listed}
        self._flush()
        self.changed.set()

    def stored(self, obj: dict[str, Any]) -> None:
        info, version = self.parse_pod(obj)
        if version and version < self._versions.get(info.key, 0):
            return
        self._versions[info.key] = version
        self._put(info)
        self._flush()
        self.changed.set()

    def pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            meta = obj.get("metadata") or {}
            key = PodKey(meta.get("namespace", ""), meta.get("name", ""))
            self._drop(key)
            self._versions.pop(key, None)
            if key.namespace == SYSTEM_NAMESPACE:
                self.placeholders.pop(key.name, None)
            self._claims_changed(self.devices.pod_dropped(key))
        else:
            self.stored(obj)

    def list_nodes(self, listed: list[NodeInfo]) -> None:
        names = {n.name for n in listed}
        for name in [n for n in self.cluster.capacity.nodes if n not in names]:
            self.cluster.drop_node(name)
        self._bare = {node.name: node for node in listed}
        for node in listed:
            self.cluster.put_node(self._equipped(node))
        self.changed.set()

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        info = NodeInfo.parse(obj)
        if kind == "DELETED":
            self._bare.pop(info.name, None)
            self.cluster.drop_node(info.name)
        else:
            self._bare[info.name] = info
            self.cluster.put_node(self._equipped(info))
        self.changed.set()

    def gangs_needing_size(self) -> dict[UnitId, PodInfo]:
        """Waiting gangs whose size only the owner knows: one member of each. Gangs that
        already run ask too, when a pod waits: a replacement or a late joiner is let in
        against the owner's current size."""
        waiting: dict[UnitId, PodInfo] = {}
        membership = self.cluster.membership
        for key in membership.gated:
            pod = self.cluster.pods[key]
            gang = pod.gang_id
            if gang is None:
                continue
            unit = UnitId.of_gang(gang)
            if unit in waiting:
                continue
            if all(m.marks.expected_size is None for m in membership.members[unit].values()):
                waiting[unit] = pod
        return waiting
