"""What expanding a workload gives: per pod template, how many pods its controller makes
and how to make the i-th, so `replicas: 1000` costs nothing until a pod is asked for; and
what an expansion is (`Expand`), as each operator's `making` module lists them."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

Pod = dict[str, Any]


def suspended(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The note for a workload whose `spec.suspend` holds its pods back (Kueue and
    JobSet suspend them until admitted): explain shows the pods it would make then."""
    return ("suspended: no pods until it is resumed (shown as they would be then)",
            ) if spec.get("suspend") else ()


@dataclass(frozen=True, slots=True)
class Context:
    """What an expansion may depend on besides the object: the clock (a CronJob's next
    Job is named after the minute it is scheduled for)."""

    now: datetime


@dataclass(frozen=True, slots=True)
class Group:
    """The pods made from one template (a ReplicaSet's, a PyTorchJob's Worker spec, a
    JobSet's replicated job, ...)."""

    template: str
    count: int
    make: Callable[[int], Pod]
    # The objects the pods' gang sizes are read from: the workload and what its
    # controller creates on the way (a JobSet's Jobs, a RayJob's RayCluster).
    owners: tuple[Mapping[str, Any], ...] = ()

    def pods(self, limit: int) -> Iterator[Pod]:
        for i in range(min(self.count, limit)):
            yield self.make(i)


@dataclass(frozen=True, slots=True)
class Expansion:
    kind: str
    name: str
    namespace: str
    groups: tuple[Group, ...]
    # What the reader should know that the pods do not show (suspended, one run of many).
    notes: tuple[str, ...] = field(default=())

    @property
    def workload(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def count(self) -> int:
        return sum(g.count for g in self.groups)


def regroup(inner: Expansion, kind: str, name: str, owner: Mapping[str, Any],
            notes: tuple[str, ...] = ()) -> Expansion:
    """`inner` (what a workload's controller creates, e.g. a Deployment's ReplicaSet) as
    the pods of the workload itself."""
    return Expansion(
        kind=kind, name=name, namespace=inner.namespace,
        groups=tuple(Group(g.template, g.count, g.make, (owner, *g.owners))
                     for g in inner.groups),
        notes=notes + inner.notes)


# An operator's expansion of one kind: the object as written, to the pods its controller
# makes.
Expand = Callable[[Mapping[str, Any], Context], Expansion]
# An operator's kinds, by (API group, kind): what `webhook.operators.registry` gathers.
Expansions = Mapping[tuple[str, str], Expand]
