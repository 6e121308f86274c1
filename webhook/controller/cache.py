"""What the watches have told us, as typed views, plus our own writes as they return."""

from __future__ import annotations

import asyncio
from typing import Any

from webhook.controller.objects import NodeInfo, PodInfo


def _version(obj: dict[str, Any]) -> int:
    # Resource versions are opaque, but etcd's are increasing integers: enough to keep a
    # late watch event from rolling back what one of our own writes already returned.
    text = (obj.get("metadata") or {}).get("resourceVersion", "")
    return int(text) if text.isdigit() else 0


class Cache:
    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], PodInfo] = {}
        self.nodes: dict[str, NodeInfo] = {}
        self._versions: dict[tuple[str, str], int] = {}
        # Gang members and queued single pods that still carry Airlock's gate: with none,
        # a round has nothing to decide, however much else in the cluster changes.
        self.gated: set[tuple[str, str]] = set()
        self.changed = asyncio.Event()

    def _track(self, info: PodInfo) -> None:
        if info.gated and info.active and (info.gang_id is not None or info.single):
            self.gated.add(info.key)
        else:
            self.gated.discard(info.key)

    @staticmethod
    def parse_pod(obj: dict[str, Any]) -> tuple[PodInfo, int]:
        return PodInfo.parse(obj), _version(obj)

    def list_pods(self, listed: list[tuple[PodInfo, int]]) -> None:
        self.pods = {info.key: info for info, _ in listed}
        self._versions = {info.key: version for info, version in listed}
        self.gated = set()
        for info in self.pods.values():
            self._track(info)
        self.changed.set()

    def stored(self, obj: dict[str, Any]) -> None:
        info, version = self.parse_pod(obj)
        if version and version < self._versions.get(info.key, 0):
            return
        self._versions[info.key] = version
        self.pods[info.key] = info
        self._track(info)
        self.changed.set()

    def pod_event(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            meta = obj.get("metadata") or {}
            key = (meta.get("namespace", ""), meta.get("name", ""))
            self.pods.pop(key, None)
            self._versions.pop(key, None)
            self.gated.discard(key)
            self.changed.set()
        else:
            self.stored(obj)

    def list_nodes(self, listed: list[NodeInfo]) -> None:
        self.nodes = {n.name: n for n in listed}
        self.changed.set()

    def node_event(self, kind: str, obj: dict[str, Any]) -> None:
        info = NodeInfo.parse(obj)
        if kind == "DELETED":
            self.nodes.pop(info.name, None)
        else:
            self.nodes[info.name] = info
        self.changed.set()

    def gangs_needing_size(self) -> dict[tuple[str, str], PodInfo]:
        """Waiting gangs whose size only the owner knows: one member of each."""
        stated: set[tuple[str, str]] = set()
        waiting: dict[tuple[str, str], PodInfo] = {}
        for pod in self.pods.values():
            gang = pod.gang_id
            if gang is None or not pod.active:
                continue
            # Gangs that already run ask too, when a pod waits: a replacement or a
            # late joiner is let in against the owner's current size.
            if pod.expected_size is not None:
                stated.add(gang)
            elif pod.gated:
                waiting.setdefault(gang, pod)
        return {g: p for g, p in waiting.items() if g not in stated}
