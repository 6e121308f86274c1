"""What the watches have told us, tracked for the rounds (`Tracked`), plus our own writes
as they return."""

from __future__ import annotations

import asyncio
from typing import Any

from webhook.accelerators import Accelerators
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.objects import NodeInfo, PodInfo
from webhook.controller.core.records import Seal
from webhook.controller.core.tracking import Tracked


def _version(obj: dict[str, Any]) -> int:
    # Resource versions are opaque, but etcd's are increasing integers: enough to keep a
    # late watch event from rolling back what one of our own writes already returned.
    text = (obj.get("metadata") or {}).get("resourceVersion", "")
    return int(text) if text.isdigit() else 0


class Cache:
    def __init__(self, accelerators: Accelerators, seal: Seal) -> None:
        self.seal = seal
        self.cluster = Tracked(accelerators)
        self._versions: dict[PodKey, int] = {}
        self.changed = asyncio.Event()

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

    def parse_pod(self, obj: dict[str, Any]) -> tuple[PodInfo, int]:
        return PodInfo.parse(obj, self.seal), _version(obj)

    def list_pods(self, listed: list[tuple[PodInfo, int]]) -> None:
        listed_keys = {info.key for info, _ in listed}
        for key in [k for k in self.cluster.pods if k not in listed_keys]:
            self.cluster.drop_pod(key)
        for info, _ in listed:
            self.cluster.put_pod(info)
        self._versions = {info.key: version for info, version in listed}
        self.changed.set()

    def stored(self, obj: dict[str, Any]) -> None:
        info, version = self.parse_pod(obj)
        if version and version < self._versions.get(info.key, 0):
            return
        self._versions[info.key] = version
        self.cluster.put_pod(info)
        self.changed.set()

    def pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            meta = obj.get("metadata") or {}
            key = PodKey(meta.get("namespace", ""), meta.get("name", ""))
            self.cluster.drop_pod(key)
            self._versions.pop(key, None)
            self.changed.set()
        else:
            self.stored(obj)

    def list_nodes(self, listed: list[NodeInfo]) -> None:
        names = {n.name for n in listed}
        for name in [n for n in self.cluster.capacity.nodes if n not in names]:
            self.cluster.drop_node(name)
        for node in listed:
            self.cluster.put_node(node)
        self.changed.set()

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        info = NodeInfo.parse(obj)
        if kind == "DELETED":
            self.cluster.drop_node(info.name)
        else:
            self.cluster.put_node(info)
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
            if all(m.expected_size is None for m in membership.members[unit].values()):
                waiting[unit] = pod
        return waiting
