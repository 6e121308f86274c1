"""What names a pod, a gang, and a unit: what is admitted or evicted as one. Typed, so
nothing is told apart by a prefix on a name or found again by splitting a string.

A *unit* is a gang (all its members), or a pod in no gang: a queued single pod waits,
is admitted and preempts as a unit of its own until it is bound, and as a victim it is
one too. Tuples underneath (NamedTuple): a round builds them for every pod it weighs.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

UnitKind = Literal["gang", "pod"]


class PodKey(NamedTuple):
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def parse(cls, text: str) -> PodKey:
        """`namespace/name`, as records keep a pod's name."""
        namespace, _, name = text.partition("/")
        return cls(namespace, name)


class GangId(NamedTuple):
    """A gang: its namespace and the name its members' gang label gives."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class UnitId(NamedTuple):
    kind: UnitKind
    namespace: str
    name: str

    @classmethod
    def of_gang(cls, gang: GangId) -> UnitId:
        return cls("gang", gang.namespace, gang.name)

    @classmethod
    def of_pod(cls, pod: PodKey) -> UnitId:
        return cls("pod", pod.namespace, pod.name)

    @property
    def path(self) -> str:
        """`namespace/name`."""
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> GangId | None:
        return GangId(self.namespace, self.name) if self.kind == "gang" else None

    def __str__(self) -> str:
        """As people read it: `gang ml/train`, `pod ml/notebook-0`."""
        return f"{self.kind} {self.path}"
