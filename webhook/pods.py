"""A small typed view of a raw Pod dict: only the fields Airlock reads.

Decoding a whole Pod into client model objects is far too slow for the admission hot
path, so the raw JSON is checked once, field by field, for the types Airlock relies on,
and then read through this view. A wrong type raises `PodShapeError` naming the field.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.keys import DEFAULT_SCHEDULER

Quantity = str | int | float
_QUANTITY_TYPES = (str, int, float)
_EMPTY: Mapping[str, Any] = {}


class PodShapeError(ValueError):
    """The object is not shaped like a Pod where Airlock needs to read it."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"{path}: expected {expected}")
        self.path = path
        self.expected = expected


# These run on every admission request, so the common case (right types) is a tight
# loop, and the path for the error message is only built when there is an error.

def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return _EMPTY
    if type(obj) is not dict:
        raise PodShapeError(path, "an object")
    return obj


def _string_map(obj: Any, path: str) -> Mapping[str, str]:
    m = _mapping(obj, path)
    for k, v in m.items():
        if type(v) is not str:
            raise PodShapeError(f"{path}.{k}", "a string")
    return m


def _quantity_map(obj: Any, path: str) -> Mapping[str, Quantity]:
    m = _mapping(obj, path)
    for k, v in m.items():
        if type(v) not in _QUANTITY_TYPES:
            raise PodShapeError(f"{path}.{k}", "a quantity (string or number)")
    return m


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    v = obj.get(key)
    if v is not None and type(v) is not str:
        raise PodShapeError(f"{path}.{key}", "a string")
    return v


def _objects(obj: Any, path: str) -> list[Mapping[str, Any]]:
    if obj is None:
        return []
    if type(obj) is not list:
        raise PodShapeError(path, "a list")
    for item in obj:
        if type(item) is not dict:
            raise PodShapeError(f"{path}[{obj.index(item)}]", "an object")
    return obj


class Container(NamedTuple):
    name: str
    image: str
    requests: Mapping[str, Quantity]
    limits: Mapping[str, Quantity]


class OwnerRef(NamedTuple):
    api_version: str
    kind: str
    name: str
    controller: bool


def _containers(raw: Any, field: str) -> tuple[Container, ...]:
    return tuple([_container(c, field, i)
                  for i, c in enumerate(_objects(raw, f"spec.{field}"))])


def _container(raw: Mapping[str, Any], field: str, index: int) -> Container:
    path = f"spec.{field}[{index}]"
    resources = raw.get("resources")
    if resources:
        resources = _mapping(resources, f"{path}.resources")
        requests = _quantity_map(resources.get("requests"), f"{path}.resources.requests")
        limits = _quantity_map(resources.get("limits"), f"{path}.resources.limits")
    else:
        requests = limits = _EMPTY
    name, image = raw.get("name") or "", raw.get("image") or ""
    if not isinstance(name, str) or not isinstance(image, str):
        raise PodShapeError(f"{path}.{'name' if not isinstance(name, str) else 'image'}",
                            "a string")
    return Container(name, image, requests, limits)


def _owner(raw: Mapping[str, Any], path: str) -> OwnerRef:
    controller = raw.get("controller")
    if controller is not None and not isinstance(controller, bool):
        raise PodShapeError(f"{path}.controller", "a boolean")
    return OwnerRef(
        _optional_str(raw, "apiVersion", path) or "",
        _optional_str(raw, "kind", path) or "",
        _optional_str(raw, "name", path) or "",
        bool(controller),
    )


@dataclass(slots=True)
class PodView:
    """The parts of a Pod that classification, mutation and validation read.
    Treat it as read-only: it is built once per review and shared by every step."""

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
    # Every resource any container requests or limits, and every image: what
    # classification asks most often, computed once.
    resources: frozenset[str]
    image_names: tuple[str, ...]

    @classmethod
    def parse(cls, obj: Any, namespace: str = "") -> PodView:
        """Check the types Airlock relies on and build the view; `namespace` is the
        request's namespace, used when the object does not carry one (pods created with
        generateName in a namespaced request)."""
        if not isinstance(obj, dict):
            raise PodShapeError("object", "an object")
        meta = _mapping(obj.get("metadata"), "metadata")
        spec = _mapping(obj.get("spec"), "spec")
        name = _optional_str(meta, "name", "metadata") or _optional_str(
            meta, "generateName", "metadata") or ""
        raw_gates = spec.get("schedulingGates")
        gates = tuple([
            _optional_str(g, "name", f"spec.schedulingGates[{i}]") or ""
            for i, g in enumerate(_objects(raw_gates, "spec.schedulingGates"))
        ]) if raw_gates else ()
        priority = spec.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise PodShapeError("spec.priority", "an integer")
        containers = _containers(spec.get("containers"), "containers")
        init = spec.get("initContainers")
        init_containers = _containers(init, "initContainers") if init else ()
        resources: set[str] = set()
        for c in containers + init_containers:
            resources.update(c.requests, c.limits)
        owners = meta.get("ownerReferences")
        return cls(
            raw=obj,
            name=name,
            namespace=_optional_str(meta, "namespace", "metadata") or namespace,
            labels=_string_map(meta.get("labels"), "metadata.labels"),
            annotations=_string_map(meta.get("annotations"), "metadata.annotations"),
            owners=tuple([
                _owner(o, f"metadata.ownerReferences[{i}]")
                for i, o in enumerate(_objects(owners, "metadata.ownerReferences"))
            ]) if owners else (),
            containers=containers,
            init_containers=init_containers,
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
            resources=frozenset(resources),
            image_names=tuple([c.image for c in containers + init_containers]),
        )

    def all_containers(self) -> Iterator[Container]:
        yield from self.init_containers
        yield from self.containers

    def controller_owner(self) -> OwnerRef | None:
        for o in self.owners:
            if o.controller:
                return o
        return self.owners[0] if self.owners else None
