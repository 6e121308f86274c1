"""Gang sizes read off an owner object. The owner is a custom object its user wrote, as
raw JSON: any shape gets an answer (a stray value is read as the API's default, never an
exception that would stop the controller), and every size an owner states passes
`gang_size`, the one place that bounds it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Elastic, SizeUnknown
from webhook.values import MAX_PODS


def spec_of(obj: Any) -> Mapping[str, Any]:
    """The `spec` of an object (or of a template inside one), empty when it has none."""
    spec = obj.get("spec") if isinstance(obj, Mapping) else None
    return spec if isinstance(spec, Mapping) else {}


def entries(obj: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """The objects in the list at `key` (a JobSet's replicated jobs, a RayCluster's worker
    groups); anything else there is passed over."""
    items = obj.get(key)
    return [i for i in items if isinstance(i, Mapping)] if isinstance(items, list) else []


def whole(obj: Any, key: str, default: int) -> int:
    """A count in an owner object, `default` when it is absent or not a whole number of at
    least 0."""
    value = obj.get(key) if isinstance(obj, Mapping) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return default


def replicas(obj: Any) -> int:
    """The replicas an object (a replica spec, a replicated job, a worker group) states: 1
    when it states none, as the operators default it."""
    return whole(obj, "replicas", 1)


def gang_size(size: int, what: str) -> int | SizeUnknown:
    """`size` (`what` the owner states) as a gang's size: from 1 to the most pods a gang may
    have, or why not."""
    if size > MAX_PODS:
        return SizeUnknown(f"{what} is {size}, more than the {MAX_PODS} pods a gang may have")
    return size if size >= 1 else SizeUnknown(f"{what} is {size}, not a gang size")


def elastic(size: int, minimum: int) -> int | Elastic:
    """A gang of `size` (a bounded `gang_size`) that may start with `minimum` pods, at
    least one: elastic only when that is fewer than all."""
    least = max(1, minimum)
    return Elastic(size, least) if least < size else size
