"""What each of a replay's pods went through, as the pod watch saw it: one JSON line each
time a pod's gate, node, nominated node, phase, or the scheduler's reason for leaving it
unbound changed, with where it was allowed to go once let go (its `nodeSelector` and the
node names its required affinity names). Kept beside the components' logs (`pods.log`),
so a half-placed gang can be read back pod by pod: which node each member took, why the
scheduler refused it, and who was on the node it needed. Pure: the replay writes the lines."""

from __future__ import annotations

from typing import Any

import orjson


class Journal:
    def __init__(self) -> None:
        self._last: dict[tuple[str, str], tuple[Any, ...]] = {}

    def line(self, now: float, wall: float, pod: dict[str, Any], deleted: bool
             ) -> bytes | None:
        """The line to write for this sight of `pod` at `now` (the trace's seconds) and
        `wall` (seconds since the epoch, as the controller's log tells time), or None when
        nothing the journal keeps changed since the last one."""
        meta, spec = pod["metadata"], pod.get("spec") or {}
        key = (meta["namespace"], meta["name"])
        status = pod.get("status") or {}
        state = (bool(spec.get("schedulingGates")), spec.get("nodeName"),
                 status.get("nominatedNodeName"), status.get("phase"), _refusal(pod),
                 deleted or bool(meta.get("deletionTimestamp")))
        if self._last.get(key) == state:
            return None
        first = key not in self._last or self._last[key][0] != state[0]
        if deleted:
            self._last.pop(key, None)
        else:
            self._last[key] = state
        gated, node, nominated, phase, refusal, gone = state
        entry: dict[str, Any] = {"t": round(now, 1), "at": round(wall, 3),
                                 "pod": f"{key[0]}/{key[1]}", "gated": gated, "node": node,
                                 "phase": phase}
        if nominated:
            entry["nominated"] = nominated
        if refusal:
            entry["unschedulable"] = refusal
        if gone:
            entry["gone"] = True
        if first and not gated:
            # Where it may go, as it was let go: its pins and fences.
            entry["nodeSelector"] = spec.get("nodeSelector") or {}
            entry["nodeNames"] = _named_nodes(spec)
        return orjson.dumps(entry) + b"\n"


def _refusal(pod: dict[str, Any]) -> str | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return None


def _named_nodes(spec: dict[str, Any]) -> list[str]:
    """The `metadata.name` requirements of the pod's node affinity, as `In:a,b` /
    `NotIn:c` where required (a pin to a node, a fence off nodes) and `Prefer:d` where
    preferred (a node it is steered to)."""
    affinity = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = [("", t) for t in required.get("nodeSelectorTerms") or []]
    terms += [("Prefer:", t.get("preference") or {}) for t in
              affinity.get("preferredDuringSchedulingIgnoredDuringExecution") or []]
    found = []
    for prefix, term in terms:
        for field in term.get("matchFields") or []:
            if field.get("key") == "metadata.name":
                values = ",".join(field.get("values") or [])
                found.append(f"{prefix or field.get('operator') + ':'}{values}")
    return found
