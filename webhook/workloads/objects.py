"""Reading a workload object's fields, with errors that name the field, and the
identities (UIDs, hashes, owner references) its controller would give what it creates.

What only the apiserver or a random source would decide (UIDs, template hashes, the
five characters of a generated name) gets a stand-in derived from the object's own
name, so the same file always explains the same way.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

FieldPath = tuple[str | int, ...]

# The alphabet of Kubernetes' rand.String and rand.SafeEncodeString: no vowels, no
# look-alikes, so generated names never spell words.
_SAFE = "bcdfghjklmnpqrstvwxz2456789"


class WorkloadError(ValueError):
    """The object is not shaped as its kind requires, at `path`."""

    def __init__(self, path: FieldPath, message: str) -> None:
        super().__init__(f"{dotted(path)}: {message}" if path else message)
        self.path = path
        self.message = message


def dotted(path: FieldPath) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def mapping(obj: Mapping[str, Any], key: str, path: FieldPath) -> Mapping[str, Any]:
    """`obj[key]` as an object; absent or null is empty."""
    value = obj.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WorkloadError((*path, key), "expected an object")
    return value


def required(obj: Mapping[str, Any], key: str, path: FieldPath,
             what: str = "an object") -> Mapping[str, Any]:
    value = obj.get(key)
    if value is None:
        raise WorkloadError((*path, key), f"is missing: {what} is required here")
    if not isinstance(value, dict):
        raise WorkloadError((*path, key), "expected an object")
    return value


def objects(obj: Mapping[str, Any], key: str, path: FieldPath) -> list[Mapping[str, Any]]:
    value = obj.get(key)
    if value is None:
        return []
    if not isinstance(value, list):
        raise WorkloadError((*path, key), "expected a list")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise WorkloadError((*path, key, i), "expected an object")
    return value


def count(obj: Mapping[str, Any], key: str, path: FieldPath, default: int) -> int:
    """A replica-like count: a whole number, at least 0 (the API's int32 fields take no
    strings, so neither does this)."""
    value = obj.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise WorkloadError((*path, key), f"{value!r} is not a number")
    if value < 0:
        raise WorkloadError((*path, key), f"{value} is negative")
    return value


def text(obj: Mapping[str, Any], key: str, path: FieldPath, default: str = "") -> str:
    value = obj.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise WorkloadError((*path, key), "expected a string")
    return value


def pod_template(obj: Mapping[str, Any], path: FieldPath,
                 key: str = "template") -> Mapping[str, Any]:
    """The pod template at obj[key], checked to hold a pod spec."""
    template = required(obj, key, path, "a pod template")
    at = (*path, key)
    required(template, "spec", at, "a pod spec")
    meta = mapping(template, "metadata", at)
    for field in ("labels", "annotations"):
        for k, v in mapping(meta, field, (*at, "metadata")).items():
            if not isinstance(v, str):
                raise WorkloadError((*at, "metadata", field, k), "expected a string")
    return template


class Meta:
    """The metadata of a workload object as its controller reads it."""

    def __init__(self, obj: Mapping[str, Any], kind: str) -> None:
        meta = mapping(obj, "metadata", ())
        self.kind = kind
        self.api_version = text(obj, "apiVersion", ())
        self.name = text(meta, "name", ("metadata",))
        if not self.name:
            raise WorkloadError(("metadata", "name"), "is missing: the object needs a name")
        self.namespace = text(meta, "namespace", ("metadata",)) or "default"
        self.labels: Mapping[str, str] = mapping(meta, "labels", ("metadata",))
        self.annotations: Mapping[str, str] = mapping(meta, "annotations", ("metadata",))
        self.uid = text(meta, "uid", ("metadata",)) or stand_in_uid(kind, self.namespace,
                                                                     self.name)

    def owner_reference(self) -> dict[str, Any]:
        return controller_reference(self.api_version, self.kind, self.namespace, self.name,
                                    self.uid)


def controller_reference(api_version: str, kind: str, namespace: str, name: str,
                         uid: str | None = None) -> dict[str, Any]:
    """What metav1.NewControllerRef makes: the owner every created object points to."""
    return {"apiVersion": api_version, "kind": kind, "name": name,
            "uid": uid or stand_in_uid(kind, namespace, name), "controller": True,
            "blockOwnerDeletion": True}


def stand_in_uid(kind: str, namespace: str, name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"airlock-explain:{kind}/{namespace}/{name}"))


def stand_in_hash(*parts: str, length: int = 10) -> str:
    """A controller's template hash (e.g. pod-template-hash): same shape, stand-in value."""
    digest = hashlib.sha256("\x00".join(parts).encode()).digest()
    return "".join(_SAFE[b % len(_SAFE)] for b in digest[:length])


def generated_name(generate_name: str, *parts: str) -> str:
    """The name the apiserver would make from generateName (five random characters)."""
    return generate_name + stand_in_hash(generate_name, *parts, length=5)


@contextmanager
def within(prefix: FieldPath) -> Iterator[None]:
    """Errors in an object a controller creates, reported at the field of the object the
    user wrote: a CronJob's Job spec is its `spec.jobTemplate.spec`."""
    try:
        yield
    except WorkloadError as e:
        path = e.path[1:] if e.path[:1] == ("spec",) else e.path
        raise WorkloadError((*prefix, *path), e.message) from None
