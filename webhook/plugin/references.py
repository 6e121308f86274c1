"""What `kubectl airlock why` is asked about: a pod (`NAME`, `pod/NAME`) or a workload
(`KIND/NAME`, any kind explain knows, by its kind, its plural, a short name or
`plural.group`), and whether a pod belongs to that workload: through the gang
convention's own owner lookup (`conventions/owners`, as the controller sizes gangs), else
up the pod's ownerReferences (a Deployment's ReplicaSet, a JobSet's Jobs). Pure: the
walk's owners come in as a lookup."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.conventions.base import OwnerAddress
from webhook.operators.registry import EXPANSIONS, membership_of, owner_sized
from webhook.pods import PodView

# The short names kubectl knows for the kinds that have one.
_SHORT = {"po": "Pod", "deploy": "Deployment", "rs": "ReplicaSet", "sts": "StatefulSet",
          "ds": "DaemonSet", "cj": "CronJob", "lws": "LeaderWorkerSet"}


@dataclass(frozen=True, slots=True)
class Reference:
    """A kind (`Pod` for a pod) in its API group ("" for the core group), and a name."""

    group: str
    kind: str
    name: str

    @property
    def is_pod(self) -> bool:
        return self.kind == "Pod" and not self.group

    @property
    def plural(self) -> str:
        # Every kind explain knows is pluralised with an "s", as the apiserver does.
        return f"{self.kind.lower()}s"

    def shown(self, namespace: str) -> str:
        return f"{self.kind.lower()} {namespace}/{self.name}"


def _names() -> dict[str, tuple[str, str]]:
    names: dict[str, tuple[str, str]] = {}
    for group, kind in EXPANSIONS:
        for word in (kind.lower(), f"{kind.lower()}s"):
            names[word] = (group, kind)
            if group:
                names[f"{word}.{group}"] = (group, kind)
    by_kind = {kind: (group, kind) for group, kind in EXPANSIONS}
    names.update({short: by_kind[kind] for short, kind in _SHORT.items()})
    return names


KINDS: Mapping[str, tuple[str, str]] = _names()


class BadReference(ValueError):
    """What was asked is no pod or workload `why` knows; the message says what it knows."""


def parse_reference(text: str) -> Reference:
    kind, slash, name = text.partition("/")
    if not slash:
        kind, name = "pod", text
    if not name or "/" in name:
        raise BadReference(f"{text!r}: expected POD or KIND/NAME")
    found = KINDS.get(kind.lower())
    if found is None:
        known = ", ".join(sorted({k for _, k in KINDS.values()}))
        raise BadReference(f"{kind!r} is not a kind kubectl airlock knows; it knows {known}")
    return Reference(found[0], found[1], name)


def named_owner(pod: PodView) -> OwnerAddress | None:
    """The object the pod's gang convention reads the gang's size from, as the controller
    finds it; None when its convention names none."""
    gang = membership_of(pod)
    convention = owner_sized(gang.source) if gang else None
    if convention is None:
        return None
    found = convention.owner(pod.labels, pod.owners)
    return found if isinstance(found, OwnerAddress) else None


# Owners above a pod, walked no higher than this (a JobSet's Job's pod is two up).
DEPTH = 4
# An owner as a reference names it: its apiVersion, kind and name.
OwnerKey = tuple[str, str, str]
# The ownerReferences of each owner the walk read (one it could not read is absent).
Owners = Mapping[OwnerKey, tuple[Mapping[str, Any], ...]]


def owner_keys(refs: Iterable[Mapping[str, Any]]) -> list[OwnerKey]:
    """The owners among `refs` of kinds explain knows: the only ones worth reading."""
    keys = [(str(r.get("apiVersion", "")), str(r.get("kind", "")), str(r.get("name", "")))
            for r in refs]
    return [k for k in keys if (_group(k[0]), k[1]) in EXPANSIONS]


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def belongs(pod: PodView, target: Reference, owners: Owners) -> bool:
    """Whether the pod is the target or one of the pods it makes."""
    if target.is_pod:
        return pod.name == target.name
    named = named_owner(pod)
    if named and (named.group, named.plural, named.name) == (
            target.group, target.plural, target.name):
        return True
    frontier, seen = owner_keys(pod.owners), set()
    for _ in range(DEPTH):
        above: list[OwnerKey] = []
        for key in frontier:
            api_version, kind, name = key
            if (_group(api_version), kind, name) == (target.group, target.kind, target.name):
                return True
            if key not in seen:
                seen.add(key)
                above += owner_keys(owners.get(key, ()))
        frontier = above
    return False
