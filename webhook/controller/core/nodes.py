"""The controller's view of a node, read from the raw JSON the watch delivers."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.controller.core.resources import Resources, parse_resources
from webhook.devices.slices import DeviceAttributes


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    allocatable: Resources
    ready: bool
    unschedulable: bool
    # What its GPUs' DRA devices say of them (`DeviceIndex.attributes`): its GPU model.
    devices: DeviceAttributes = field(default_factory=dict)

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NodeInfo:
        meta, spec, status = (raw.get("metadata") or {}, raw.get("spec") or {},
                              raw.get("status") or {})
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        return cls(name=meta.get("name", ""), labels=meta.get("labels") or {},
                   taints=tuple(spec.get("taints") or ()),
                   allocatable=parse_resources(status.get("allocatable")),
                   ready=ready, unschedulable=bool(spec.get("unschedulable")))
