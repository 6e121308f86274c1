"""The decisions the controller records on pods, as data: a placement
(`gpu-airlock.io/placement`, on the anchor of the members it admits, in the same patch as
the anchor's ungate) and a preemption (`gpu-airlock.io/preemption`, on the preemptor's
anchor, before any victim goes). How they are sealed and opened is `seals`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal

Kind = Literal["placement", "preemption"]


@dataclass(frozen=True, slots=True)
class Record:
    """An admission: the members it lifted, into which domain, when, and the gang's size
    then (to notice a size that changes later). A gang that later takes in replacements
    gets one more record, on the first replacement, in the same domain."""

    domain: str | None
    topology_key: str | None
    members: tuple[str, ...]
    at: float
    size: int | None = None
    # An elastic gang: the fewest members it runs with (it is short only below them).
    minimum: int | None = None
    # A sliced gang: the node label of the slice level, and each member's domain of it.
    slice_key: str | None = None
    slices: tuple[tuple[str, str], ...] = ()
    # A gang let onto the room reserved for the head of the queue (backfill): when it was
    # expected to end. Past then, it is the first victim when the head is ready.
    backfilled_until: float | None = None
    # Nodes reserved for the head of the queue or held for a preemptor, which the gang may
    # not use, and nodes whose room is promised to pods let go but not bound yet: fenced
    # off at ungate (pinned away), since the scheduler would not know to leave them.
    fenced_off: tuple[str, ...] = ()
    # The GPU model it was admitted on, and the node labels that pin it there.
    model: str | None = None
    model_labels: tuple[tuple[str, str], ...] = ()
    # The node each member was planned on, for the members sent there at ungate (none
    # under `--pin domain`, nor for a pod that names its own node): pinned there, or,
    # for a pod no owner makes again, preferring it. A new leader finishing the lift
    # sends them to the same nodes, and only pods a record pins (and that carry the pin)
    # are re-planned when their node fails them.
    nodes: tuple[tuple[str, str], ...] = ()

    kind: ClassVar[Literal["placement"]] = "placement"

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {"domain": self.domain, "topologyKey": self.topology_key,
                                "members": list(self.members), "at": self.at}
        if self.size is not None:
            body["size"] = self.size
        if self.minimum is not None:
            body["minimum"] = self.minimum
        if self.slice_key is not None:
            body["sliceKey"] = self.slice_key
            body["slices"] = dict(self.slices)
        if self.backfilled_until is not None:
            body["backfilledUntil"] = self.backfilled_until
        if self.fenced_off:
            body["fencedOff"] = list(self.fenced_off)
        if self.model is not None:
            body["model"] = self.model
            body["modelLabels"] = dict(self.model_labels)
        if self.nodes:
            body["nodes"] = dict(self.nodes)
        return body

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Record:
        size = raw.get("size")
        slices = raw.get("slices") or {}
        until = raw.get("backfilledUntil")
        minimum = raw.get("minimum")
        labels = raw.get("modelLabels") or {}
        nodes = raw.get("nodes") or {}
        return cls(_optional(raw.get("domain")), _optional(raw.get("topologyKey")),
                   tuple(str(m) for m in raw["members"]), float(raw["at"]),
                   size if isinstance(size, int) else None,
                   minimum if isinstance(minimum, int) else None,
                   _optional(raw.get("sliceKey")),
                   tuple(sorted((str(k), str(v)) for k, v in dict(slices).items())),
                   float(until) if until is not None else None,
                   # `keptOff`: what an earlier version named it.
                   tuple(str(n) for n in raw.get("fencedOff") or raw.get("keptOff") or ()),
                   _optional(raw.get("model")),
                   tuple(sorted((str(k), str(v)) for k, v in dict(labels).items())),
                   tuple(sorted((str(k), str(v)) for k, v in dict(nodes).items())))

    def slice_of(self, member: str) -> str | None:
        """The slice domain the record pins `member` to, if any."""
        return dict(self.slices).get(member)

    def node_of(self, member: str) -> str | None:
        """The node the record pins `member` to, if any."""
        return dict(self.nodes).get(member)


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """A preemption: the victims (by namespace/name and uid), the domain and nodes held
    for the preemptor, and when. A new leader evicts what is left and keeps the room."""

    domain: str | None
    topology_key: str | None
    victims: tuple[str, ...]  # "namespace/name" of every victim pod
    nodes: tuple[str, ...]
    at: float
    # The victims' uids, in the same order: a pod recreated under a victim's name (a
    # StatefulSet's) is not the victim.
    uids: tuple[str, ...] = ()

    kind: ClassVar[Literal["preemption"]] = "preemption"

    def body(self) -> dict[str, Any]:
        return {"domain": self.domain, "topologyKey": self.topology_key,
                "victims": list(self.victims), "uids": list(self.uids),
                "nodes": list(self.nodes), "at": self.at}

    @classmethod
    def of(cls, raw: dict[str, Any]) -> PreemptionRecord:
        record = cls(_optional(raw.get("domain")), _optional(raw.get("topologyKey")),
                     tuple(str(v) for v in raw["victims"]),
                     tuple(str(n) for n in raw.get("nodes") or ()), float(raw["at"]),
                     tuple(str(u) for u in raw.get("uids") or ()))
        if len(record.uids) != len(record.victims) or not all(record.uids):
            # A victim known only by name could be a namesake made after the decision.
            raise ValueError("every victim needs its uid")
        return record

    def names(self, key: tuple[str, str], uid: str) -> bool:
        """Whether the pod `key` with `uid` is one of the victims, not a namesake."""
        try:
            i = self.victims.index(f"{key[0]}/{key[1]}")
        except ValueError:
            return False
        return self.uids[i] == uid


AnyRecord = Record | PreemptionRecord
TYPES: Final[dict[Kind, type[Record] | type[PreemptionRecord]]] = {
    "placement": Record, "preemption": PreemptionRecord}


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)
