"""PodDisruptionBudgets as preemption needs them: how many more of the pods each selects
may be disrupted now. The watch keeps `Pdb` views; `budgets_of` turns them into the
`Budget`s a round checks victims against. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.controller.matching import selects
from webhook.controller.objects import PodInfo
from webhook.controller.preempting import Budget


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


def budgets_of(pdbs: Iterable[Pdb], pods: Iterable[PodInfo]) -> tuple[Budget, ...]:
    """The budgets that cover any pod that could be a victim (one asking for extended
    resources: the pods whose labels the cache keeps)."""
    by_namespace: dict[str, list[PodInfo]] = {}
    for pod in pods:
        if pod.active and any("/" in k for k in pod.requests):
            by_namespace.setdefault(pod.namespace, []).append(pod)
    found = []
    for pdb in pdbs:
        # A PDB with a null selector selects nothing in policy/v1.
        if pdb.selector is None:
            continue
        keys = frozenset(p.key for p in by_namespace.get(pdb.namespace, ())
                         if selects(pdb.selector, p.labels))
        if keys:
            found.append(Budget(f"{pdb.namespace}/{pdb.name}", pdb.allowed, keys))
    return tuple(found)
