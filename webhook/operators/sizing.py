"""Gang sizes that only an owner object states, read from the objects explain has in hand
(the workload a pod was expanded from, the other objects in the same files: a PodGroup,
the PyTorchJob beside its pods) through the conventions' own owner lookup and size
functions: the controller reads the same objects from the apiserver with the same
functions."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.conventions.base import Elastic, Joins, OwnerAddress
from webhook.operators.registry import owner_sized


def _is(obj: Mapping[str, Any], address: OwnerAddress) -> bool:
    """Whether `obj` is the object at `address` (each owner kind's plural is its name in
    lower case and an s: jobs, jobsets, pytorchjobs, rayclusters, podgroups)."""
    api_version, kind, meta = obj.get("apiVersion"), obj.get("kind"), obj.get("metadata")
    return (isinstance(api_version, str) and api_version.rpartition("/")[0] == address.group
            and isinstance(kind, str) and f"{kind.lower()}s" == address.plural
            and isinstance(meta, dict) and meta.get("name") == address.name)


def owner_size(source: str, pod: Mapping[str, Any], owners: Sequence[Mapping[str, Any]],
               joins: Joins) -> int | None:
    """The size of the pod's gang (found by convention `source`) as the owner among
    `owners` states it, counting the members that `joins` (the policy's accelerators);
    None when no owner at hand states one."""
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
            size = convention.size(obj, labels, joins)
            if isinstance(size, Elastic):
                return size.size
            return size if isinstance(size, int) else None
    return None
