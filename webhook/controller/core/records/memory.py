"""What the leader keeps in the cluster for the next one (`remembering`'s ConfigMap): the
fair-share usage, since when gangs have been short, and the run times learned for
backfill. Versioned like the records, not sealed: only the controller may write that
ConfigMap (RBAC, in Airlock's namespace)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal

from webhook.controller.core.records.seals import VERSION

# What the leader keeps for the next one (`remembering`'s ConfigMap): the fair-share usage,
# since when gangs have been short, and the run times learned for backfill. Versioned
# like the records, not sealed: only the controller may write that ConfigMap (RBAC, in
# Airlock's namespace).
MemoryKind = Literal["fairShare", "shortSince", "runtimes"]


def dump_memory(kind: MemoryKind, body: dict[str, Any]) -> str:
    return json.dumps({**body, "v": VERSION, "kind": kind}, sort_keys=True)


def load_memory(kind: MemoryKind, text: str, legacy: Callable[[dict[str, Any]], dict[str, Any]]
           ) -> dict[str, Any] | None:
    """What `dump_memory` wrote, without its version and kind; what a leader before versions
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
