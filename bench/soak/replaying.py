"""The soak's pod watch replayed, pod by pod: where each holds GPUs, when it was ungated,
bound and evicted, and the decisions recorded on the gangs' anchors, for the checks made
once the whole history is in (bench.soak.checking). The checks a moment decides are made
as it goes (a node over-committed, a pod stored without Airlock's marks), and each pod's
story is kept to print under a violation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from bench.soak.findings import Findings
from tests.kube import gated
from webhook.controller.core.actions import EventReason
from webhook.controller.core.growth.placeholders import placeholder_of
from webhook.controller.core.identities import GangId
from webhook.controller.core.records import PreemptionRecord, Record, peek
from webhook.controller.core.resources import pod_requests
from webhook.keys import (
    CLASS_LABEL,
    GANG_LABEL,
    PLACEMENT_ANNOTATION,
    PREEMPTION_ANNOTATION,
)
from webhook.sandbox.nodes import GPU

# Airlock's evictions, by the reason of their Event; its message and the pod's
# DisruptionTarget condition's both start "<reason>:".
PREEMPTED: EventReason = "Preempted"
REQUEUED: EventReason = "Requeued"
EVENT_REASONS = frozenset({PREEMPTED, REQUEUED})


def told(reason: EventReason, message: str) -> bool:
    return message.startswith(reason + ":")


@dataclass(frozen=True, slots=True)
class Seen:
    """One watch event: when the driver saw it, its type and the pod as it was then."""

    at: float
    kind: str  # ADDED, MODIFIED or DELETED
    pod: Mapping[str, Any]


@dataclass(slots=True)
class Pod:
    name: str  # namespace/name
    gang: GangId | None
    gpus: int
    node: str | None = None  # where it holds GPUs now
    landed: str | None = None  # where it was bound
    running: bool = False  # bound, not finished, not being deleted
    ungated: float | None = None
    bound: float | None = None
    evicted: tuple[float, str] | None = None  # when it was marked, and the message
    placeholder: bool = False  # Airlock's, asking an autoscaler for room


@dataclass(slots=True)
class Preemption:
    record: PreemptionRecord
    gang: GangId
    seen: float


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") in ("True", "False"):
            return dict(c)
    return None


class Replay:
    def __init__(self, nodes: Mapping[str, int], kills: Sequence[float],
                 restarts: Mapping[str, Sequence[float]]) -> None:
        self.nodes = nodes
        self.kills = sorted(kills)
        # What the soak did, to print among a pod's changes.
        self.chaos = sorted([*((at, "the controller SIGKILLed") for at in kills),
                             *((at, f"{kind} SIGKILLed and restarted")
                               for kind, times in restarts.items() for at in times)])
        self.pods: dict[str, Pod] = {}
        self.on_node: dict[str, dict[str, int]] = {}
        self.preemptions: dict[tuple[str, float], Preemption] = {}
        self.placements: dict[tuple[GangId, float], tuple[Record, float]] = {}
        # Gangs with an evicted member: who ran when the first was marked.
        self.running_at_eviction: dict[GangId, set[str]] = {}
        # Members that found no room once let go: when, and each node's free GPUs then
        # (as the apiserver had it), until they land.
        self.unplaced: dict[str, tuple[float, dict[str, int]]] = {}
        self.partial: dict[GangId, str] = {}  # the gang, and the member that found no room
        self.placeholder_left: dict[str, float] = {}  # node -> when one last left it
        self.arrived: dict[GangId, float] = {}
        self.found = Findings(kills=len(kills))
        self.seen: dict[str, list[Seen]] = {}  # every pod's history, by uid
        self.first_seen: float | None = None

    def _pod(self, uid: str, seen: Seen) -> Pod:
        """The pod `seen` is of, followed from its first sight."""
        pod = self.pods.get(uid)
        if pod is not None:
            return pod
        raw = seen.pod
        meta = raw["metadata"]
        gang = meta.get("labels", {}).get(GANG_LABEL)
        pod = self.pods[uid] = Pod(
            f"{meta['namespace']}/{meta['name']}",
            GangId(meta["namespace"], gang) if gang else None,
            pod_requests(raw["spec"]).get(GPU, 0))
        pod.placeholder = placeholder_of(raw) is not None
        if seen.kind != "DELETED" and not pod.placeholder and \
                CLASS_LABEL not in (meta.get("labels") or {}):
            self.found.violations["pods stored without Airlock's marks"].append(
                f"{pod.name}: stored without {CLASS_LABEL}{self.story(uid)}")
        return pod

    def _bound(self, uid: str, pod: Pod, node: str, at: float) -> None:
        """The pod's first bind: what kept it from binding sooner, if anything did."""
        pod.bound, pod.landed = at, node
        if (unplaced := self.unplaced.pop(uid, None)) is not None:
            since, free = unplaced
            if self.placeholder_left.get(node, -1.0) >= since:
                self.found.displaced_placeholders += 1
            elif free.get(node, 0) >= pod.gpus:
                # The room was there: the scheduler's cache was behind the apiserver
                # (its watches take up to 30 s to come back after a restart).
                self.found.placed_late.append(at - since)
            elif pod.gang is not None:
                self.partial.setdefault(pod.gang, uid)

    def see(self, seen: Seen) -> None:
        raw = seen.pod
        meta = raw["metadata"]
        uid = meta["uid"]
        self.seen.setdefault(uid, []).append(seen)
        if self.first_seen is None:
            self.first_seen = seen.at
        pod = self._pod(uid, seen)
        if pod.gang is not None:
            self.arrived.setdefault(pod.gang, seen.at)
        if seen.kind == "DELETED":
            pod.running = False
            self._place(uid, pod, None, seen.at)
            return
        phase = (raw.get("status") or {}).get("phase")
        node = raw["spec"].get("nodeName")
        finished = phase in ("Succeeded", "Failed")
        self._place(uid, pod, None if finished else node, seen.at)
        if node and pod.bound is None:
            self._bound(uid, pod, node, seen.at)
        if not gated(raw) and pod.ungated is None:
            pod.ungated = seen.at
        disruption = _condition(raw, "DisruptionTarget")
        if disruption is not None:
            message = str(disruption.get("message", ""))
            if pod.evicted is None:
                self._evicted(pod, seen.at, message)
            elif any(told(reason, message) for reason in EVENT_REASONS):
                # The eviction API's own condition comes first; Airlock's, which says
                # why, right after it.
                pod.evicted = (pod.evicted[0], message)
        pod.running = bool(node) and not finished and not meta.get("deletionTimestamp")
        scheduled = _condition(raw, "PodScheduled")
        if pod.gang and not node and not gated(raw) and scheduled is not None and \
                scheduled.get("reason") == "Unschedulable" and uid not in self.unplaced:
            self.unplaced[uid] = (seen.at, {n: gpus - sum(self.on_node.get(n, {}).values())
                                            for n, gpus in self.nodes.items()})
        annotations = meta.get("annotations") or {}
        if pod.gang and (text := annotations.get(PREEMPTION_ANNOTATION)):
            record = peek("preemption", text)
            if isinstance(record, PreemptionRecord):
                self.preemptions.setdefault((uid, record.at),
                                            Preemption(record, pod.gang, seen.at))
        if pod.gang and (text := annotations.get(PLACEMENT_ANNOTATION)):
            placement = peek("placement", text)
            if isinstance(placement, Record):
                self.placements.setdefault((pod.gang, placement.at), (placement, seen.at))

    def _place(self, uid: str, pod: Pod, node: str | None, at: float) -> None:
        """Keep each node's GPUs in use current; more than it has is a violation."""
        if pod.node and pod.node != node:
            self.on_node.get(pod.node, {}).pop(uid, None)
            if pod.placeholder:
                self.placeholder_left[pod.node] = at
        pod.node = node
        if node is None:
            return
        used = self.on_node.setdefault(node, {})
        used[uid] = pod.gpus
        if sum(used.values()) > self.nodes.get(node, 0):
            self.found.violations["over-committed nodes"].append(
                f"{node}: {sum(used.values())} GPUs requested by bound pods at "
                f"{self.since(at)}, it has {self.nodes.get(node, 0)}"
                + "".join(self.story(u) for u in used))

    def since(self, at: float) -> str:
        return f"{at - (at if self.first_seen is None else self.first_seen):.1f}s"

    def story(self, uid: str) -> str:
        """A pod's history so far, one line per change the watch saw, to print under a
        violation."""
        lines = [f"\n    history of {self.pods[uid].name}:" if uid in self.pods else ""]
        history = self.seen.get(uid, [])
        chaos = iter([(at, what) for at, what in self.chaos
                      if history and history[0].at <= at <= history[-1].at])
        pending = next(chaos, None)
        for seen in history:
            while pending is not None and pending[0] <= seen.at:
                lines.append(f"\n      {self.since(pending[0]):>8} ({pending[1]})")
                pending = next(chaos, None)
            meta, spec = seen.pod["metadata"], seen.pod["spec"]
            status = seen.pod.get("status") or {}
            disruption = _condition(seen.pod, "DisruptionTarget")
            lines.append(
                f"\n      {self.since(seen.at):>8} {seen.kind:<8} "
                f"class={(meta.get('labels') or {}).get(CLASS_LABEL, '-')} "
                f"gated={'yes' if gated(seen.pod) else 'no'} node={spec.get('nodeName') or '-'} "
                f"phase={status.get('phase', '-')}"
                f"{' deleting' if meta.get('deletionTimestamp') else ''}"
                f"{' evicted: ' + str(disruption.get('message', ''))[:50] if disruption else ''}")
        return "".join(lines)

    def _evicted(self, pod: Pod, at: float, message: str) -> None:
        pod.evicted = (at, message)
        if pod.gang is not None and pod.gang not in self.running_at_eviction:
            self.running_at_eviction[pod.gang] = {
                u for u, p in self.pods.items() if p.gang == pod.gang and p.running}
