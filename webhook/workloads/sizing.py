"""Gang sizes that only an owner object states, read from the objects explain has in hand
(the workload a pod was expanded from, PodGroups in the same files) through the
conventions' own owner lookup and size functions: the controller reads the same objects
from the apiserver with the same functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.conventions.base import OwnerAddress
from webhook.conventions.registry import owner_sized


def _is(obj: Mapping[str, Any], address: OwnerAddress) -> bool:
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else None
    meta = obj.get("metadata")
    return (group == address.group and isinstance(meta, dict)
            and meta.get("name") == address.name)


def owner_size(source: str, pod: Mapping[str, Any],
               owners: Sequence[Mapping[str, Any]]) -> int | None:
    """The size of the pod's gang (found by convention `source`) as the owner among
    `owners` states it; None when no owner at hand states one."""
    convention = owner_sized(source)
    if convention is None:
        return None
    meta = pod.get("metadata") or {}
    labels: Mapping[str, str] = meta.get("labels") or {}
    address = convention.owner(labels, meta.get("ownerReferences") or [])
    if not isinstance(address, OwnerAddress):
        return None
    for obj in owners:
        if _is(obj, address):
            size = convention.size(obj, labels)
            return size if isinstance(size, int) else None
    return None
