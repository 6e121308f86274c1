"""A small typed view of a raw Pod dict: only the fields Airlock reads.

Decoding a whole Pod into client model objects is far too slow for the admission hot
path, so the raw JSON is checked once, field by field, for the types Airlock relies on,
and then read through this view. A wrong type raises `PodShapeError` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.keys import DEFAULT_SCHEDULER

Quantity = str | int | float


class PodShapeError(ValueError):
    """The object is not shaped like a Pod where Airlock needs to read it."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"{path}: expected {expected}")
        self.path = path
        self.expected = expected


def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise PodShapeError(path, "an object")
    return obj


def _string_map(obj: Any, path: str) -> Mapping[str, str]:
    m = _mapping(obj, path)
    for k, v in m.items():
        if not isinstance(v, str):
            raise PodShapeError(f"{path}.{k}", "a string")
    return m


def _quantity_map(obj: Any, path: str) -> Mapping[str, Quantity]:
    m = _mapping(obj, path)
    for k, v in m.items():
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise PodShapeError(f"{path}.{k}", "a quantity (string or number)")
    return m


def _list(obj: Any, path: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise PodShapeError(path, "a list")
    return obj


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    v = obj.get(key)
    if v is not None and not isinstance(v, str):
        raise PodShapeError(f"{path}.{key}", "a string")
    return v


def _objects(obj: Any, path: str) -> list[Mapping[str, Any]]:
    items = _list(obj, path)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PodShapeError(f"{path}[{i}]", "an object")
    return items


@dataclass(frozen=True, slots=True)
class Container:
    name: str
    image: str
    requests: Mapping[str, Quantity]
    limits: Mapping[str, Quantity]


@dataclass(frozen=True, slots=True)
class OwnerRef:
    api_version: str
    kind: str
    name: str
    controller: bool


def _container(raw: Mapping[str, Any], path: str) -> Container:
    resources = _mapping(raw.get("resources"), f"{path}.resources")
    return Container(
        name=_optional_str(raw, "name", path) or "",
        image=_optional_str(raw, "image", path) or "",
        requests=_quantity_map(resources.get("requests"), f"{path}.resources.requests"),
        limits=_quantity_map(resources.get("limits"), f"{path}.resources.limits"),
    )


def _owner(raw: Mapping[str, Any], path: str) -> OwnerRef:
    controller = raw.get("controller")
    if controller is not None and not isinstance(controller, bool):
        raise PodShapeError(f"{path}.controller", "a boolean")
    return OwnerRef(
        api_version=_optional_str(raw, "apiVersion", path) or "",
        kind=_optional_str(raw, "kind", path) or "",
        name=_optional_str(raw, "name", path) or "",
        controller=bool(controller),
    )


@dataclass(frozen=True, slots=True)
class PodView:
    """The parts of a Pod that classification, mutation and validation read."""

    raw: Mapping[str, Any]
    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    owners: tuple[OwnerRef, ...]
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    scheduler_name: str
    gates: tuple[str, ...]
    priority_class_name: str | None
    has_priority: bool
    has_preemption_policy: bool
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    affinity: Mapping[str, Any]
    topology_spread: tuple[Mapping[str, Any], ...]

    @classmethod
    def parse(cls, obj: Any, namespace: str = "") -> PodView:
        """Check the types Airlock relies on and build the view; `namespace` is the
        request's namespace, used when the object does not carry one (pods created with
        generateName in a namespaced request)."""
        if not isinstance(obj, dict):
            raise PodShapeError("object", "an object")
        pod: Mapping[str, Any] = obj
        meta = _mapping(pod.get("metadata"), "metadata")
        spec = _mapping(pod.get("spec"), "spec")
        name = _optional_str(meta, "name", "metadata") or _optional_str(
            meta, "generateName", "metadata"
        ) or ""
        ns = _optional_str(meta, "namespace", "metadata") or namespace
        gates = tuple(
            _optional_str(g, "name", f"spec.schedulingGates[{i}]") or ""
            for i, g in enumerate(_objects(spec.get("schedulingGates"), "spec.schedulingGates"))
        )
        priority = spec.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise PodShapeError("spec.priority", "an integer")
        return cls(
            raw=pod,
            name=name,
            namespace=ns,
            labels=_string_map(meta.get("labels"), "metadata.labels"),
            annotations=_string_map(meta.get("annotations"), "metadata.annotations"),
            owners=tuple(
                _owner(o, f"metadata.ownerReferences[{i}]")
                for i, o in enumerate(_objects(meta.get("ownerReferences"),
                                               "metadata.ownerReferences"))
            ),
            containers=tuple(
                _container(c, f"spec.containers[{i}]")
                for i, c in enumerate(_objects(spec.get("containers"), "spec.containers"))
            ),
            init_containers=tuple(
                _container(c, f"spec.initContainers[{i}]")
                for i, c in enumerate(_objects(spec.get("initContainers"),
                                               "spec.initContainers"))
            ),
            scheduler_name=_optional_str(spec, "schedulerName", "spec") or DEFAULT_SCHEDULER,
            gates=gates,
            priority_class_name=_optional_str(spec, "priorityClassName", "spec") or None,
            has_priority=priority is not None,
            has_preemption_policy=spec.get("preemptionPolicy") is not None,
            node_selector=_string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
            tolerations=tuple(_objects(spec.get("tolerations"), "spec.tolerations")),
            affinity=_mapping(spec.get("affinity"), "spec.affinity"),
            topology_spread=tuple(
                _objects(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
            ),
        )

    def all_containers(self) -> Iterator[Container]:
        yield from self.init_containers
        yield from self.containers

    def images(self) -> Iterator[str]:
        return (c.image for c in self.all_containers())

    def requested(self, resource: str) -> bool:
        """True when any container requests or limits `resource` (an extended resource
        given only as a limit defaults its request to the limit)."""
        return any(
            resource in c.requests or resource in c.limits for c in self.all_containers()
        )

    def controller_owner(self) -> OwnerRef | None:
        for o in self.owners:
            if o.controller:
                return o
        return self.owners[0] if self.owners else None
