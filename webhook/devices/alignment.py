"""GPUs and NICs kept under one PCIe root (or any attribute two classes share): how many
such pairs a node still has free.

Policy names the pairs (`alignWith` on a NIC's DeviceClass), and a claim that asks for
them carries `matchAttribute` constraints (`claims._aligned`), which the scheduler's DRA
allocator enforces per claim. A pair is one device of each class with the same value of
the attribute; a node has, for each value, as many free pairs as the fewer free devices
of either class under it. Counting the devices of both classes alone would send a gang
to a node whose free GPUs sit under one root and free NICs under another.

What is free: every device of the node's slices but those allocated to claims that keep
no pairs. The pairs that aligned claims hold are charged to their pods instead, as any
claimed device is, so a node offers its free pairs plus those, and what its pods claim
is taken off that as usual."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from webhook.devices.kinds import AttributeValue, DeviceKind
from webhook.devices.slices import attributes_of, pool_of

# A device as an allocation names it: its driver, pool and name.
DeviceId = tuple[str, str, str]
# A device of a class some pair holds: its id, its class, and the attributes pairs share.
PairedDevice = tuple[DeviceId, str, tuple[tuple[str, AttributeValue], ...]]


def pair_kinds(kinds: Iterable[DeviceKind]) -> tuple[DeviceKind, ...]:
    return tuple(k for k in kinds if k.pairs is not None)


def paired_devices(slice_obj: Mapping[str, Any], kinds: Iterable[DeviceKind]
                   ) -> tuple[PairedDevice, ...]:
    """The devices of one slice that some pair may hold, each with the class it counts
    for (the first kind it matches) and the values of the attributes pairs share."""
    kinds = tuple(kinds)
    pairs = pair_kinds(kinds)
    wanted = {c for p in pairs if p.pairs for c in p.pairs[:2]}
    shared = {p.pairs[2] for p in pairs if p.pairs}
    if not wanted:
        return ()
    driver, pool, _ = pool_of(slice_obj)
    devices = (slice_obj.get("spec") or {}).get("devices")
    found: list[PairedDevice] = []
    for device in devices if isinstance(devices, list) else ():
        if not isinstance(device, Mapping) or not isinstance(device.get("name"), str):
            continue
        attributes = attributes_of(device, driver)
        kind = next((k for k in kinds if k.matches(driver, attributes)), None)
        if kind is not None and kind.device_class in wanted:
            values = tuple(sorted((a, attributes[a]) for a in shared if a in attributes))
            found.append(((driver, pool, device["name"]), kind.device_class, values))
    return tuple(found)


def allocated(claim: Mapping[str, Any]) -> tuple[DeviceId, ...]:
    """The devices a ResourceClaim's status says the scheduler allocated to it."""
    status = claim.get("status")
    allocation = status.get("allocation") if isinstance(status, Mapping) else None
    devices = allocation.get("devices") if isinstance(allocation, Mapping) else None
    results = devices.get("results") if isinstance(devices, Mapping) else None
    found: list[DeviceId] = []
    for result in results if isinstance(results, list) else ():
        if isinstance(result, Mapping) and all(
                isinstance(result.get(k), str) for k in ("driver", "pool", "device")):
            found.append((result["driver"], result["pool"], result["device"]))
    return tuple(found)


def free_pairs(devices: Iterable[PairedDevice], taken: Collection[DeviceId],
               kinds: Iterable[DeviceKind]) -> dict[str, int]:
    """For each pair kind, by its resource: the pairs of free devices (not `taken`) that
    share a value of its attribute, summed over the values."""
    devices = tuple(d for d in devices if d[0] not in taken)
    found: dict[str, int] = {}
    for kind in kinds:
        if kind.pairs is None:
            continue
        gpu_class, nic_class, attribute = kind.pairs
        free: dict[AttributeValue, list[int]] = {}
        for _, device_class, values in devices:
            value = dict(values).get(attribute)
            if value is not None and device_class in (gpu_class, nic_class):
                free.setdefault(value, [0, 0])[device_class == nic_class] += 1
        pairs = sum(min(counts) for counts in free.values())
        if pairs:
            found[kind.resource] = pairs
    return found
