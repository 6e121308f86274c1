"""What a node's ResourceSlices offer, counted by the kinds policy maps.

A driver publishes each pool's devices in one or more slices; while it replaces a pool,
slices of the old and the new generation coexist, and only the newest counts (`pool_of`
tells them apart). Slices bound to one node (`spec.nodeName`) count for it; devices
reachable from many nodes (`nodeSelector`, `allNodes`: network-attached) are not counted,
and a gang that needs them is left to the scheduler. Accepts `resource.k8s.io/v1` devices
(attributes on the device) and `v1beta1` ones (under `basic`)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from webhook.devices.kinds import AttributeValue, DeviceKind, qualified


def node_of(slice_obj: Mapping[str, Any]) -> str | None:
    spec = slice_obj.get("spec")
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    return node if isinstance(node, str) and node else None


def _value(raw: Any) -> AttributeValue | None:
    if isinstance(raw, Mapping):
        for key in ("string", "int", "bool", "version"):
            value = raw.get(key)
            if isinstance(value, str | int | bool):
                return value
    return None


def attributes_of(device: Mapping[str, Any], driver: str) -> dict[str, AttributeValue]:
    """A device's attributes by qualified name."""
    basic = device.get("basic")
    raw = (basic if isinstance(basic, Mapping) else device).get("attributes")
    found: dict[str, AttributeValue] = {}
    for name, value in raw.items() if isinstance(raw, Mapping) else ():
        parsed = _value(value)
        if isinstance(name, str) and parsed is not None:
            found[qualified(name, driver)] = parsed
    return found


def pool_of(slice_obj: Mapping[str, Any]) -> tuple[str, str, int]:
    """(driver, pool, generation): slices of one pool and generation replace those of an
    older generation."""
    spec = slice_obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    pool = spec.get("pool")
    pool = pool if isinstance(pool, Mapping) else {}
    generation = pool.get("generation", 0)
    return (str(spec.get("driver", "")), str(pool.get("name", "")),
            generation if type(generation) is int else 0)


def counts(slice_obj: Mapping[str, Any], kinds: Iterable[DeviceKind]) -> dict[str, int]:
    """The devices one slice offers, by the resource of the kind each counts for (the
    first it matches)."""
    kinds = tuple(kinds)
    driver = pool_of(slice_obj)[0]
    devices = (slice_obj.get("spec") or {}).get("devices")
    found: dict[str, int] = {}
    for device in devices if isinstance(devices, list) else ():
        if not isinstance(device, Mapping):
            continue
        attributes = attributes_of(device, driver)
        kind = next((k for k in kinds if k.matches(driver, attributes)), None)
        if kind is not None:
            found[kind.resource] = found.get(kind.resource, 0) + 1
    return found


# Attribute name -> the values GPU devices have for it.
DeviceAttributes = Mapping[str, frozenset[AttributeValue]]


def gpu_attributes(slice_obj: Mapping[str, Any], kinds: Iterable[DeviceKind],
                   wanted: Collection[str]) -> dict[str, frozenset[AttributeValue]]:
    """The values the slice's GPUs (devices of a kind counted as one) have for each
    attribute `wanted`, by its qualified name and, for the driver's own, its bare name:
    what tells a node's GPU model (`gpuModels[].deviceAttributes`)."""
    if not wanted:
        return {}
    gpus = tuple(k for k in kinds if k.gpu)
    driver = pool_of(slice_obj)[0]
    devices = (slice_obj.get("spec") or {}).get("devices")
    found: dict[str, set[AttributeValue]] = {}
    for device in devices if isinstance(devices, list) else ():
        if not isinstance(device, Mapping):
            continue
        attributes = attributes_of(device, driver)
        if not any(k.matches(driver, attributes) for k in gpus):
            continue
        for name, value in attributes.items():
            bare = name.removeprefix(f"{driver}/")
            for key in {name, bare} & set(wanted):
                found.setdefault(key, set()).add(value)
    return {k: frozenset(v) for k, v in found.items()}


def merged(parts: Iterable[DeviceAttributes]) -> dict[str, frozenset[AttributeValue]]:
    """Attributes of several slices, as one node's."""
    found: dict[str, frozenset[AttributeValue]] = {}
    for part in parts:
        for name, values in part.items():
            found[name] = found.get(name, frozenset()) | values
    return found
