"""PodDisruptionBudgets as preemption needs them: how many more of the pods each selects
may be disrupted now. The watch keeps `Pdb` views; `budgets_of` turns them into the
`Budget`s a round checks victims against. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.controller.core.cluster.filters import selects
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.identities import PodKey
from webhook.controller.core.pods import PodInfo


@dataclass(frozen=True, slots=True)
class Budget:
    """A PodDisruptionBudget as preemption checks victims against it: how many of `pods`
    may go now."""

    name: str
    allowed: int
    pods: frozenset[PodKey]


@dataclass(frozen=True, slots=True)
class Pdb:
    namespace: str
    name: str
    selector: Mapping[str, Any] | None
    # The disruption controller's count; 0 until it has looked (so: protected).
    allowed: int

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> Pdb:
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        status = raw.get("status") or {}
        return cls(meta.get("namespace", ""), meta.get("name", ""), spec.get("selector"),
                   int(status.get("disruptionsAllowed") or 0))


def budgets_of(pdbs: Iterable[Pdb], cluster: Tracked) -> tuple[Budget, ...]:
    """The budgets that cover any pod that could be a victim: a pod holding GPUs, or a
    member of a gang (a unit goes whole, its waiting members too)."""
    # A PDB with a null selector selects nothing in policy/v1.
    pdbs = [pdb for pdb in pdbs if pdb.selector is not None]
    namespaces = {pdb.namespace for pdb in pdbs}
    by_namespace: dict[str, dict[PodKey, PodInfo]] = {}
    for key in cluster.occupancy.gpus_of:
        if key.namespace in namespaces:
            by_namespace.setdefault(key.namespace, {})[key] = cluster.pods[key]
    for unit, members in cluster.membership.members.items():
        if unit.namespace in namespaces:
            by_namespace.setdefault(unit.namespace, {}).update(members)
    found = []
    for pdb in pdbs:
        keys = frozenset(key for key, p in by_namespace.get(pdb.namespace, {}).items()
                         if selects(pdb.selector, p.labels))
        if keys:
            found.append(Budget(f"{pdb.namespace}/{pdb.name}", pdb.allowed, keys))
    return tuple(found)
