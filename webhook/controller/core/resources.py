"""What pods request and nodes offer, read from their raw JSON as the scheduler counts it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.values import units

Resources = dict[str, int]
# CPU is counted in millicores and everything else in whole units (bytes for memory).
_MILLI = frozenset({"cpu"})


def _amount(resource: str, quantity: Any) -> int:
    """Whole units, rounded up as the scheduler rounds (milli-CPU, bytes, devices)."""
    if not isinstance(quantity, str | int | float):
        return 0
    return units(quantity, 1000 if resource in _MILLI else 1)


def parse_resources(raw: Mapping[str, Any] | None) -> Resources:
    return {k: _amount(k, v) for k, v in (raw or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> Resources:
    # A resource given only as a limit is requested at the limit (the apiserver's
    # defaulting; extended resources such as GPUs are often written that way).
    res = container.get("resources") or {}
    return {**parse_resources(res.get("limits")), **parse_resources(res.get("requests"))}


def add(total: Resources, more: Resources) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _at_least(total: Resources, floor: Resources) -> None:
    for k, v in floor.items():
        total[k] = max(total.get(k, 0), v)


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler counts for a pod, resource by resource: the larger of
    - the app containers plus every sidecar (an init container with
      `restartPolicy: Always`, which keeps running beside them), and
    - each regular init container plus the sidecars started before it (and each sidecar
      plus those before it), since init containers run one at a time;
    then the pod overhead (RuntimeClass) on top."""
    sidecars: Resources = {}
    init_peak: Resources = {}
    for c in spec.get("initContainers") or []:
        requests = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            add(sidecars, requests)
            _at_least(init_peak, sidecars)
        else:
            running = dict(sidecars)
            add(running, requests)
            _at_least(init_peak, running)
    total: Resources = dict(sidecars)
    for c in spec.get("containers") or []:
        add(total, _container_requests(c))
    _at_least(total, init_peak)
    add(total, parse_resources(spec.get("overhead")))
    return total


def requested(requests: Resources) -> tuple[str, ...]:
    """The resources of which the pod asks for some."""
    return tuple(k for k, v in requests.items() if v > 0)
