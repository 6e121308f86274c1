"""A claim's GPUs paired with its NICs, each pair under one PCIe root: the rewrite the
webhook makes to a ResourceClaim or ResourceClaimTemplate as it is created, for the pairs
policy names (`alignWith` on a NIC's DeviceClass).

A `matchAttribute` constraint keeps every device of the requests it names under ONE value
of the attribute. A claim of 4 GPUs and 4 NICs constrained as two requests would need 8
devices under one root, which an HGX board (two GPUs and two NICs per root) never has. So
a GPU request and a NIC request of the same count n become n requests of one GPU
(`<gpu>-0` ...) and n of one NIC (`<nic>-0` ...), each GPU constrained with its NIC: the
scheduler's allocator then puts each pair under one root, the pairs under any roots. With
n = 1 only the constraint is added. A container that names the claim gets every device,
as before; one that names a request by name (`request: gpu`) would have to name the new
ones, so a claim whose requests are split is answered with a warning saying so.

Left alone, with a warning where the user may have meant pairs: a claim whose requests of
the two classes differ in count or are not one exact count each (`All`, `firstAvailable`),
or that already constrains them on the attribute (the user's own alignment stands)."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.devices.kinds import DeviceKind

Request = dict[str, Any]


def _exact(request: Mapping[str, Any], device_class: str) -> int | None:
    """The count of a request of one device class by exact count; None otherwise."""
    exactly = request.get("exactly")
    if not isinstance(exactly, Mapping) or exactly.get("deviceClassName") != device_class \
            or exactly.get("allocationMode", "ExactCount") != "ExactCount" \
            or exactly.get("adminAccess") is True:
        return None
    count = exactly.get("count", 1)
    return count if type(count) is int and count >= 1 else None


def _of_class(requests: list[Request], device_class: str) -> list[Request]:
    return [r for r in requests if isinstance(r.get("exactly"), Mapping)
            and r["exactly"].get("deviceClassName") == device_class]


def _constrained(devices: Mapping[str, Any], names: set[str], attribute: str) -> bool:
    constraints = devices.get("constraints")
    return isinstance(constraints, list) and any(
        isinstance(c, Mapping) and c.get("matchAttribute") == attribute
        and (not c.get("requests") or bool(names & set(c.get("requests") or ())))
        for c in constraints)


def _short(attribute: str) -> str:
    return attribute.rsplit("/", 1)[-1]


def _renamed(names: Any, split: Mapping[str, list[str]]) -> Any:
    """A constraint's or config's list of request names, each split name replaced by the
    names it became."""
    if not isinstance(names, list):
        return names
    return [new for name in names for new in split.get(name, [name])]


def _split(devices: dict[str, Any], gpu: Request, nic: Request, count: int,
           attribute: str) -> None:
    """Rewrite `devices` in place: `count` pairs of single requests, each constrained."""
    requests: list[Request] = devices["requests"]
    split: dict[str, list[str]] = {}
    pairs: list[list[str]] = [[], []]
    for side, request in enumerate((gpu, nic)):
        name = str(request["name"])
        names = [f"{name}-{i}" for i in range(count)] if count > 1 else [name]
        split[name] = names
        pairs[side] = names
        singles = [{**request, "name": n, "exactly": {**request["exactly"], "count": 1}}
                   for n in names]
        at = requests.index(request)
        requests[at:at + 1] = singles
    for section in ("constraints", "config"):
        for entry in devices.get(section) or ():
            if isinstance(entry, dict) and "requests" in entry:
                entry["requests"] = _renamed(entry["requests"], split)
    devices.setdefault("constraints", []).extend(
        {"requests": [g, n], "matchAttribute": attribute} for g, n in zip(*pairs, strict=True))


def paired(spec: Any, kinds: Iterable[DeviceKind]) -> tuple[dict[str, Any] | None, list[str]]:
    """The claim spec's `devices` rewritten so each GPU has its NIC under one value of the
    pair's attribute (None: nothing to change), and warnings for the user."""
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    if not isinstance(devices, Mapping) or not isinstance(devices.get("requests"), list):
        return None, []
    rewritten: dict[str, Any] = copy.deepcopy(dict(devices))
    requests = [r for r in rewritten["requests"] if isinstance(r, dict)]
    warnings: list[str] = []
    changed = False
    for kind in kinds:
        if kind.pairs is None:
            continue
        gpu_class, nic_class, attribute = kind.pairs
        gpus, nics = _of_class(requests, gpu_class), _of_class(requests, nic_class)
        if not gpus or not nics:
            continue
        names = {str(r.get("name")) for r in gpus + nics}
        if _constrained(rewritten, names, attribute):
            continue
        counts = [_exact(r, c) for r, c in ((gpus[0], gpu_class), (nics[0], nic_class))]
        if len(gpus) != 1 or len(nics) != 1 or None in counts or counts[0] != counts[1]:
            warnings.append(f"not aligned by {_short(attribute)}: Airlock pairs one exact "
                            f"request of {gpu_class} with one of {nic_class} of equal count")
            continue
        count = counts[0] or 1
        _split(rewritten, gpus[0], nics[0], count, attribute)
        changed = True
        if count > 1:
            warnings.append(f"{gpus[0]['name']}, {nics[0]['name']} split into {count} pairs "
                            f"(-0 ...), one {_short(attribute)} each: containers must name "
                            f"the claim")
    return (rewritten if changed else None), warnings
