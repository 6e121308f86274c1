"""The controller's durable records and the one codec they go through.

A decision the controller must finish after a crash is written on a pod before anything
is done about it: a placement (`gpu-airlock.io/placement`, on the anchor of the members it
admits, in the same patch as the anchor's ungate) and a preemption
(`gpu-airlock.io/preemption`, on the preemptor's anchor, before any victim goes).

A pod's annotations are its creator's to write, so a record is acted on only when the
controller can prove it wrote it. Every record is sealed: its version, its kind and the uid
of the pod it is written on go into an HMAC-SHA256 with a key only the controller reads
(a Secret in Airlock's namespace, `sealing`). A record copied to another pod, edited, or
written by anyone else does not open. Records written before sealing existed (no version)
open only on pods created before the key, so an upgrade in the middle of a lift or a
preemption loses nothing while no new pod can pass one off.

Pure: the key and the clock come in as arguments.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, NamedTuple, Protocol

Kind = Literal["placement", "preemption"]
VERSION: Final = 1
# Leaders' clocks differ by seconds: a record stamped further ahead than this is not ours.
FUTURE_SKEW: Final = 60.0


def _text(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


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
    # A gang let onto the room kept for the head of the queue (backfill): when it was
    # expected to end. Past then, it is the first victim when the head is ready.
    backfilled_until: float | None = None
    # Nodes kept for the head of the queue or held for a preemptor, which the gang may not
    # use: pinned away at ungate, since the scheduler would not know to leave them.
    kept_off: tuple[str, ...] = ()

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
        if self.kept_off:
            body["keptOff"] = list(self.kept_off)
        return body

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Record:
        size = raw.get("size")
        slices = raw.get("slices") or {}
        until = raw.get("backfilledUntil")
        minimum = raw.get("minimum")
        return cls(_optional(raw.get("domain")), _optional(raw.get("topologyKey")),
                   tuple(str(m) for m in raw["members"]), float(raw["at"]),
                   size if isinstance(size, int) else None,
                   minimum if isinstance(minimum, int) else None,
                   _optional(raw.get("sliceKey")),
                   tuple(sorted((str(k), str(v)) for k, v in dict(slices).items())),
                   float(until) if until is not None else None,
                   tuple(str(n) for n in raw.get("keptOff") or ()))

    def slice_of(self, member: str) -> str | None:
        """The slice domain the record pins `member` to, if any."""
        return dict(self.slices).get(member)


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
_TYPES: Final[dict[Kind, type[Record] | type[PreemptionRecord]]] = {
    "placement": Record, "preemption": PreemptionRecord}


def _optional(value: Any) -> str | None:
    return None if value is None else str(value)


class Untrusted(NamedTuple):
    """A record the controller will not act on, and why (for its event)."""

    kind: Kind
    reason: str


class Seal:
    """Seals records with the controller's key and opens only what it sealed."""

    def __init__(self, key: bytes, since: float, clock: Callable[[], float]) -> None:
        if len(key) < 16:
            raise ValueError("a record key needs at least 16 bytes")
        self._key = key
        # When the key was made: records without a version count only on older pods.
        self.since = since
        self.clock = clock

    def _mac(self, text: str) -> str:
        return hmac.new(self._key, text.encode(), hashlib.sha256).hexdigest()

    def dumps(self, record: AnyRecord, uid: str) -> str:
        """The record as written on the pod with `uid`."""
        sealed = {**record.body(), "v": VERSION, "kind": record.kind, "uid": uid}
        return _text({**sealed, "mac": self._mac(_text(sealed))})

    def loads(self, kind: Kind, text: str, uid: str, created: float) -> AnyRecord | Untrusted:
        """The record of `kind` in `text`, found on the pod with `uid` made at `created`,
        if the controller wrote it there."""
        try:
            raw = json.loads(text)
            if not isinstance(raw, dict):
                raise ValueError("not an object")
            if "v" not in raw:
                if created >= self.since:
                    return Untrusted(kind, "it carries no seal and the pod is newer than "
                                           "the controller's record key")
            else:
                mac = raw.pop("mac", None)
                if raw.get("v") != VERSION or raw.get("kind") != kind or \
                        raw.get("uid") != uid or not isinstance(mac, str) or \
                        not hmac.compare_digest(mac, self._mac(_text(raw))):
                    return Untrusted(kind, "its seal does not match this pod: the "
                                           "controller did not write it here")
            record = _TYPES[kind].of(raw)
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            return Untrusted(kind, f"it is malformed ({e})")
        ahead = record.at - self.clock()
        if ahead > FUTURE_SKEW:
            return Untrusted(kind, f"it is dated {ahead:.0f}s in the future")
        return record


class Opener(Protocol):
    def loads(self, kind: Kind, text: str, uid: str, created: float
              ) -> AnyRecord | Untrusted: ...


class Unverified:
    """Opens every well-formed record without its seal: for `airlock status`, which shows
    what the controller would do and acts on nothing."""

    def loads(self, kind: Kind, text: str, uid: str,  # noqa: ARG002 (the Opener's)
              created: float) -> AnyRecord | Untrusted:  # noqa: ARG002
        return peek(kind, text) or Untrusted(kind, "it is malformed")


# What the leader keeps for the next one (`remembering`'s ConfigMap): the fair-share usage,
# since when gangs have been short, and the run times learned for backfill. Versioned
# like the records, not sealed: only the controller may write that ConfigMap (RBAC, in
# Airlock's namespace).
Kept = Literal["fairShare", "shortSince", "runtimes"]


def keep(kind: Kept, body: dict[str, Any]) -> str:
    return json.dumps({**body, "v": VERSION, "kind": kind}, sort_keys=True)


def recall(kind: Kept, text: str, legacy: Callable[[dict[str, Any]], dict[str, Any]]
           ) -> dict[str, Any] | None:
    """What `keep` wrote, without its version and kind; what a leader before versions
    wrote, through `legacy`; None when it is neither (kept by a newer version, or not
    JSON)."""
    try:
        raw = json.loads(text)
    except ValueError:
        return None
    if not isinstance(raw, dict):
        return None
    if "v" not in raw:
        return legacy(raw)
    if raw.pop("v") != VERSION or raw.pop("kind", None) != kind:
        return None
    return raw


def peek(kind: Kind, text: str) -> AnyRecord | None:
    """What a record says, unverified: for observers (the soak's checks, status) that show
    or check records, never for acting on them."""
    try:
        raw = json.loads(text)
        return _TYPES[kind].of(raw) if isinstance(raw, dict) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
