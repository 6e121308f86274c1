"""A small typed view of a raw Pod dict: only the fields Airlock reads.

Decoding a whole Pod into client model objects is far too slow for the admission hot
path, so the raw JSON is checked once, field by field, for the types Airlock relies on,
and then read through this view. A wrong type raises `PodShapeError` naming the field.
"""

from __future__ import annotations

import dataclasses
import operator
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeVar

from webhook.keys import DEFAULT_SCHEDULER

Quantity = str | int | float
_QUANTITY_TYPES = (str, int, float)
_EMPTY: Mapping[str, Any] = {}
_image = operator.attrgetter("image")
T = TypeVar("T")


class PodShapeError(ValueError):
    """The object is not shaped like a Pod where Airlock needs to read it."""

    def __init__(self, path: str, expected: str) -> None:
        super().__init__(f"{path}: expected {expected}")
        self.path = path
        self.expected = expected

    def within(self, parent: str) -> PodShapeError:
        return PodShapeError(f"{parent}.{self.path}", self.expected)


# These run on every admission request, so the common case (right types) is a tight
# loop with few calls, and a path is only built when there is an error: helpers for a
# list's items report paths within the item, and the loop over the list adds the index.

def _mapping(obj: Any, path: str) -> Mapping[str, Any]:
    if obj is None:
        return _EMPTY
    if type(obj) is not dict:
        raise PodShapeError(path, "an object")
    return obj


def _string_map(obj: Any, path: str) -> Mapping[str, str]:
    if obj is None:
        return _EMPTY
    if type(obj) is not dict:
        raise PodShapeError(path, "an object")
    for k, v in obj.items():
        if type(v) is not str:
            raise PodShapeError(f"{path}.{k}", "a string")
    return obj


def _quantity_map(obj: Any, path: str) -> Mapping[str, Quantity]:
    if obj is None:
        return _EMPTY
    if type(obj) is not dict:
        raise PodShapeError(path, "an object")
    for k, v in obj.items():
        if type(v) not in _QUANTITY_TYPES:
            raise PodShapeError(f"{path}.{k}", "a quantity (string or number)")
    return obj


def _optional_str(obj: Mapping[str, Any], key: str, path: str) -> str | None:
    v = obj.get(key)
    if v is not None and type(v) is not str:
        raise PodShapeError(f"{path}.{key}" if path else key, "a string")
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


def _each(raw: Any, path: str, read: Callable[[Mapping[str, Any]], T]) -> tuple[T, ...]:
    """`read` applied to each object of a list; its errors are placed at the item. An item
    that is not an object is reported before any item's error, as `_objects` would, but
    looked for only once there is an error: one pass over the list, not two."""
    if raw is None:
        return ()
    if type(raw) is not list:
        raise PodShapeError(path, "a list")
    out = []
    for i, item in enumerate(raw):
        if type(item) is not dict:
            raise PodShapeError(f"{path}[{i}]", "an object")
        try:
            out.append(read(item))
        except PodShapeError as e:
            _objects(raw, path)
            raise e.within(f"{path}[{i}]") from None
    return tuple(out)


def _container(raw: Mapping[str, Any]) -> Container:
    resources = raw.get("resources")
    if resources:
        if type(resources) is not dict:
            raise PodShapeError("resources", "an object")
        requests = _quantity_map(resources.get("requests"), "resources.requests")
        limits = _quantity_map(resources.get("limits"), "resources.limits")
    else:
        requests = limits = _EMPTY
    name, image = raw.get("name") or "", raw.get("image") or ""
    if type(name) is not str or type(image) is not str:
        raise PodShapeError("name" if type(name) is not str else "image", "a string")
    return Container(name, image, requests, limits)


@dataclass(frozen=True, slots=True)
class PodClaim:
    """An entry of `spec.resourceClaims`: a ResourceClaim of its own name (which other
    pods may share), or one made for the pod from a ResourceClaimTemplate."""

    name: str
    claim: str | None
    template: str | None


def _claim(raw: Mapping[str, Any]) -> PodClaim:
    return PodClaim(_optional_str(raw, "name", "") or "",
                    _optional_str(raw, "resourceClaimName", "") or None,
                    _optional_str(raw, "resourceClaimTemplateName", "") or None)


def _owner(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """An ownerReference, checked and kept as it came: rules read only the kind of one."""
    controller = raw.get("controller")
    if controller is not None and type(controller) is not bool:
        raise PodShapeError("controller", "a boolean")
    api_version, kind, name = raw.get("apiVersion"), raw.get("kind"), raw.get("name")
    if type(api_version) is not str or type(kind) is not str or type(name) is not str:
        for key in ("apiVersion", "kind", "name"):
            _optional_str(raw, key, "")
    return raw


def _gate(raw: Mapping[str, Any]) -> str:
    return _optional_str(raw, "name", "") or ""


@dataclass(slots=True)
class PodView:
    """The parts of a Pod that classification, mutation and validation read.
    Treat it as read-only: it is built once per review and shared by every step."""

    raw: Mapping[str, Any]
    name: str
    namespace: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    # Checked as _owner does; `controller_kind` reads the one rules match on.
    owners: tuple[Mapping[str, Any], ...]
    containers: tuple[Container, ...]
    init_containers: tuple[Container, ...]
    scheduler_name: str
    # A pod that names its node skips the scheduler; the apiserver rejects one that also
    # carries a scheduling gate.
    node_name: str | None
    gates: tuple[str, ...]
    priority_class_name: str | None
    # As the apiserver's Priority plugin resolved it from the class name (or the default).
    priority: int | None
    has_preemption_policy: bool
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]
    affinity: Mapping[str, Any]
    topology_spread: tuple[Mapping[str, Any], ...]
    # Every resource any container requests or limits, and every image: what
    # classification asks most often, computed once.
    resources: frozenset[str]
    image_names: tuple[str, ...]
    claims: tuple[PodClaim, ...] = ()
    # What the claims ask for, by the resource each mapped DeviceClass counts as: added
    # to `resources` once the claims are looked up (`claimed`).
    devices: Mapping[str, int] | None = None
    # The GPU models the claims' selectors allow (`productName`), most wanted first; None:
    # any; (): none the policy defines, and why (`claim_problem`).
    claim_models: tuple[str, ...] | None = None
    claim_problem: str | None = None

    @classmethod
    def parse(cls, obj: Any, namespace: str = "") -> PodView:
        """Check the types Airlock relies on and build the view; `namespace` is the
        request's namespace, used when the object does not carry one (pods created with
        generateName in a namespaced request). Fields are checked in a fixed order, so a
        pod wrong in several places is always told of the same one."""
        if not isinstance(obj, dict):
            raise PodShapeError("object", "an object")
        meta = _mapping(obj.get("metadata"), "metadata")
        spec = _mapping(obj.get("spec"), "spec")
        # The string fields are tested in place, not by a call each: calls are most of
        # what a parse costs.
        name = meta.get("name")
        if name is not None and type(name) is not str:
            raise PodShapeError("metadata.name", "a string")
        if not name:
            name = _optional_str(meta, "generateName", "metadata")
        raw_gates = spec.get("schedulingGates")
        gates = _each(raw_gates, "spec.schedulingGates", _gate) if raw_gates else ()
        priority = spec.get("priority")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise PodShapeError("spec.priority", "an integer")
        containers = _each(spec.get("containers"), "spec.containers", _container)
        init = spec.get("initContainers")
        init_containers = _each(init, "spec.initContainers", _container) if init else ()
        every = containers + init_containers
        resources: set[str] = set()
        for c in every:
            resources.update(c.requests, c.limits)
        own_namespace = meta.get("namespace")
        if own_namespace is not None and type(own_namespace) is not str:
            raise PodShapeError("metadata.namespace", "a string")
        labels = _string_map(meta.get("labels"), "metadata.labels")
        annotations = _string_map(meta.get("annotations"), "metadata.annotations")
        owners = meta.get("ownerReferences")
        owner_refs = _each(owners, "metadata.ownerReferences", _owner) if owners else ()
        scheduler = spec.get("schedulerName")
        if scheduler is not None and type(scheduler) is not str:
            raise PodShapeError("spec.schedulerName", "a string")
        priority_class = spec.get("priorityClassName")
        if priority_class is not None and type(priority_class) is not str:
            raise PodShapeError("spec.priorityClassName", "a string")
        node_name = spec.get("nodeName")
        if node_name is not None and type(node_name) is not str:
            raise PodShapeError("spec.nodeName", "a string")
        # Positional: keyword arguments to a constructor of this many fields are matched
        # name by name, ~10k instructions, a sixth of the parse.
        return cls(
            obj, name or "", own_namespace or namespace, labels, annotations, owner_refs,
            containers, init_containers, scheduler or DEFAULT_SCHEDULER, node_name or None,
            gates, priority_class or None, priority,
            spec.get("preemptionPolicy") is not None,
            _string_map(spec.get("nodeSelector"), "spec.nodeSelector"),
            tuple(_objects(spec.get("tolerations"), "spec.tolerations")),
            _mapping(spec.get("affinity"), "spec.affinity"),
            tuple(_objects(spec.get("topologySpreadConstraints"),
                           "spec.topologySpreadConstraints")),
            frozenset(resources), tuple(map(_image, every)),
            _each(claims, "spec.resourceClaims", _claim)
            if (claims := spec.get("resourceClaims")) else (),
        )

    def claimed(self, devices: Mapping[str, int], models: tuple[str, ...] | None = None,
                problem: str | None = None) -> PodView:
        """This pod, asking also for the devices its claims come to, of the GPU `models`
        they select (None: any; (): none, for the reason `problem` gives)."""
        return dataclasses.replace(self, resources=self.resources.union(devices),
                                   devices=devices, claim_models=models, claim_problem=problem)

    def all_containers(self) -> Iterator[Container]:
        yield from self.init_containers
        yield from self.containers

    def controller_kind(self) -> str | None:
        """The kind of the owner that controls the pod (else its first owner), if any."""
        owners = self.owners
        chosen = next((o for o in owners if o.get("controller") is True),
                      owners[0] if owners else None)
        return None if chosen is None else chosen.get("kind") or ""
