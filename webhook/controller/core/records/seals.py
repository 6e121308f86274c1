"""The one codec records go through: sealed with the controller's key, opened only where the
controller can prove it wrote them.

A pod's annotations are its creator's to write, so a record is acted on only when the
controller can prove it wrote it. Every record is sealed: its version, its kind and the uid
of the pod it is written on go into an HMAC-SHA256 with a key only the controller reads
(a Secret in Airlock's namespace, `sealing`). A record copied to another pod, edited, or
written by anyone else does not open. Records written before sealing existed (no version)
open only on pods created before the key, so an upgrade in the middle of a lift or a
preemption loses nothing while no new pod can pass one off.

Pure: the key and the clock come in as arguments."""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from typing import Any, Final, NamedTuple, Protocol

from webhook.controller.core.records.decisions import TYPES, AnyRecord, Kind

VERSION: Final = 1
# Leaders' clocks differ by seconds: a record stamped further ahead than this is not ours.
FUTURE_SKEW: Final = 60.0


def _text(raw: dict[str, Any]) -> str:
    return json.dumps(raw, sort_keys=True, separators=(",", ":"))


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
            record = TYPES[kind].of(raw)
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


def peek(kind: Kind, text: str) -> AnyRecord | None:
    """What a record says, unverified: for observers (the soak's checks, status) that show
    or check records, never for acting on them."""
    try:
        raw = json.loads(text)
        return TYPES[kind].of(raw) if isinstance(raw, dict) else None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
