"""What a ResourceClaim or ResourceClaimTemplate asks for, and how many devices of each
mapped class that comes to.

The rules, for each request of the claim's spec (`spec.devices.requests`, or the
template's `spec.spec.devices.requests`):
- `ExactCount` (the default) asks for `count` devices (default 1);
- `All` asks for every matching device of the node it lands on: counted as the most any
  node offers of the class, so the pod goes only where a whole node's worth is free;
- `firstAvailable` lists alternatives the scheduler tries in order: counted as the first
  whose class policy maps (the one the scheduler prefers), or nothing when none is;
- `adminAccess` requests count nothing: they reach devices without allocating them.

Accepts the shapes of `resource.k8s.io/v1` (a request's `exactly`) and of `v1beta1`
(the same fields on the request itself)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from webhook.devices.kinds import DeviceKind, aligned_class
from webhook.devices.selectors import Selection, selection
from webhook.values import MAX_DEVICES

ClaimKind = Literal["ResourceClaim", "ResourceClaimTemplate"]


@dataclass(frozen=True, slots=True)
class Ask:
    """One request: the classes it may be met from, in the scheduler's order of
    preference (one unless `firstAvailable`), each with its count (None: `All`), and
    the attribute values its CEL selectors require of each (`selectors`; none where
    they require nothing)."""

    choices: tuple[tuple[str, int | None], ...]
    selected: tuple[Selection, ...] = ()


def _choice(request: Mapping[str, Any]) -> tuple[str, int | None] | None:
    device_class = request.get("deviceClassName")
    if not isinstance(device_class, str) or request.get("adminAccess") is True:
        return None
    if request.get("allocationMode") == "All":
        return device_class, None
    count = request.get("count", 1)
    if type(count) is not int or count < 1:
        return device_class, 1
    # The apiserver bounds a claim's count far lower; a file given to explain need not.
    return device_class, min(count, MAX_DEVICES)


def asks_of(spec: Any) -> tuple[Ask, ...]:
    """The requests of a ResourceClaimSpec, then the sets its `matchAttribute`
    constraints keep together (`_aligned`); nothing for what is not one."""
    devices = spec.get("devices") if isinstance(spec, Mapping) else None
    requests = devices.get("requests") if isinstance(devices, Mapping) else None
    asks: list[Ask] = []
    by_name: dict[str, Ask] = {}
    for request in requests if isinstance(requests, list) else ():
        if not isinstance(request, Mapping):
            continue
        alternatives = request.get("firstAvailable")
        if isinstance(alternatives, list) and alternatives:
            options = [a for a in alternatives if isinstance(a, Mapping)]
        else:
            exactly = request.get("exactly")
            options = [exactly if isinstance(exactly, Mapping) else request]
        found = [(c, selection(o)) for o in options if (c := _choice(o)) is not None]
        if found:
            selected = tuple(s for _, s in found)
            asks.append(Ask(tuple(c for c, _ in found), selected if any(selected) else ()))
            by_name[str(request.get("name", ""))] = asks[-1]
    constraints = devices.get("constraints") if isinstance(devices, Mapping) else None
    for constraint in constraints if isinstance(constraints, list) else ():
        if (ask := _aligned(constraint, by_name)) is not None:
            asks.append(ask)
    return tuple(asks)


def _aligned(constraint: Any, by_name: Mapping[str, Ask]) -> Ask | None:
    """A constraint keeping the devices of two classes under one attribute value, as an
    ask of `aligned_class`: as many units as the fewer devices of either class. Only
    requests of one class and a count (no `All`, no `firstAvailable`) count."""
    attribute = constraint.get("matchAttribute") if isinstance(constraint, Mapping) else None
    if not isinstance(attribute, str):
        return None
    names = constraint.get("requests")
    chosen = [by_name.get(n) for n in names] if isinstance(names, list) and names \
        else list(by_name.values())
    counts: dict[str, int] = {}
    for ask in chosen:
        if ask is None or len(ask.choices) != 1 or ask.choices[0][1] is None:
            return None
        device_class, count = ask.choices[0]
        counts[device_class] = counts.get(device_class, 0) + (count or 0)
    if len(counts) != 2:
        return None
    return Ask(((aligned_class(attribute, counts), min(counts.values())),))


def claim_spec(obj: Any, template: bool) -> Any:
    """The ResourceClaimSpec of a ResourceClaim (`spec`) or of a ResourceClaimTemplate
    (`spec.spec`)."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    if template and isinstance(spec, Mapping):
        return spec.get("spec")
    return spec


def demand(asks: tuple[Ask, ...], kinds: Mapping[str, DeviceKind],
           most: Callable[[str], int]) -> dict[str, int]:
    """Devices of each mapped class the asks come to, by the class's resource; `most`
    gives, for a class, the most devices of it any node offers (for `All`)."""
    found: dict[str, int] = {}
    for ask in asks:
        for device_class, count in ask.choices:
            kind = kinds.get(device_class)
            if kind is None:
                continue
            amount = most(device_class) if count is None else count
            found[kind.resource] = found.get(kind.resource, 0) + amount
            break
    return found


def gpu_selections(asks: Iterable[Ask], kinds: Mapping[str, DeviceKind]
                   ) -> list[tuple[Selection, ...]]:
    """For each request that may take GPUs and selects what it takes, the selections of
    its GPU alternatives, in order: what tells which GPU models it allows
    (`webhook.policy.gpumodels`)."""
    found = []
    for ask in asks:
        gpus = tuple(s for (device_class, _), s in zip(ask.choices, ask.selected, strict=False)
                     if (kind := kinds.get(device_class)) is not None and kind.gpu)
        if gpus:
            found.append(gpus)
    return found


def named(pod_spec: Any) -> list[tuple[ClaimKind, str]]:
    """The claims and templates a pod's (or a pod template's) spec names, read leniently:
    a ResourceClaim of its own name, or a template the pod's claim is made from."""
    entries = pod_spec.get("resourceClaims") if isinstance(pod_spec, Mapping) else None
    found: list[tuple[ClaimKind, str]] = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping):
            continue
        claim, template = entry.get("resourceClaimName"), entry.get("resourceClaimTemplateName")
        if isinstance(claim, str) and claim:
            found.append(("ResourceClaim", claim))
        elif isinstance(template, str) and template:
            found.append(("ResourceClaimTemplate", template))
    return found


def claims_gpus(template: Any, asks: Callable[[ClaimKind, str], tuple[Ask, ...] | None],
                kinds: Mapping[str, DeviceKind]) -> bool:
    """Whether the pods a pod template makes claim GPUs through DRA: a claim or template
    it names (looked up with `asks`) asks for a DeviceClass counted as one. With the
    accelerators' own test, what decides that an owner's replicas join its gang."""
    spec = template.get("spec") if isinstance(template, Mapping) else None
    gpus = {c: k for c, k in kinds.items() if k.gpu}
    for kind, name in named(spec):
        found = asks(kind, name)
        if found and demand(found, gpus, lambda _: 1):
            return True
    return False
