"""The soak's invariants, checked from what the apiserver said (pure: a pod watch's
history, the nodes, the Events and the moments the controller was killed, in; counts
and violations out).

After a run:
- **no gang is half-evicted**: when a member of a running gang is evicted (a
  `DisruptionTarget` condition, whoever set it), every member that was running then is
  evicted too;
- **no victim without its preemptor admitted next**: every pod Airlock evicted for a
  preemption is named (by uid) in a recorded decision on its preemptor; the preemptor
  is then admitted, whole (every member bound), and no other gang is let onto the nodes
  held for it in between, whether the leader that decided finished it or the next one;
- **no node over-committed**: at no moment do the pods bound to a node and not finished
  request more GPUs than it has;
- **events explain every eviction**: each pod Airlock evicted has its `Preempted` (or
  `Requeued`) Event;
- **no gang half placed**: no member of a gang finds no room once its gates are lifted
  while others hold theirs (Airlock lifts a preemptor's gates only once its victims are
  gone). Room a placeholder holds counts as free, by design: the scheduler evicts the
  placeholder (priority -1) for the member, which then lands where it found no room a
  moment before. And a member the scheduler found no room for while the apiserver showed
  its room free (on the node it then lands on) met a scheduler whose cache was behind:
  after an apiserver restart its watches take up to 30 s to come back. Both are counted,
  not violations: a member that lands where the apiserver had no room for it is one;
- **no pod stored without Airlock's marks**: each pod is first seen with its class label
  (the soak's mutation fails closed, so a pod created while the webhook is down is
  refused, never stored unmarked);
- **fair-share usage kept**: what the leader keeps in the cluster for the next one never
  goes back, across kills and restarts, by more than its half-life's decay;
- **no orphaned capacity request**: once every gang is gone, no placeholder is left;
- **no controller exit**: the controller never exits by itself, whatever it meets
  (the driver says so, and starts it again as its Deployment would).

GPUs here are `nvidia.com/gpu`, counted per node: a GPU booked twice is a node
over-committed, which the third check counts.

Times are the driver's clock; a decision "finished by the next leader" is one whose
record was first seen before a kill and some of whose work (an eviction, an ungating)
was seen after it.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.kube import gated
from webhook.controller.core.actions import RECLAIMED, EventReason
from webhook.controller.core.growth.placeholders import placeholder_of
from webhook.controller.core.identities import GangId
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.core.records import PreemptionRecord, Record, load_memory, peek
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


def _told(reason: EventReason, message: str) -> bool:
    return message.startswith(reason + ":")

VIOLATIONS = ("half-evicted gangs", "victims without their preemptor admitted next",
              "over-committed nodes", "evictions without an event", "partial gangs",
              "pods stored without Airlock's marks", "fair-share usage lost",
              "orphaned capacity requests", "controller exits")
# The policy's default fair-share half-life: how fast kept usage may shrink.
HALF_LIFE = 24 * 3600.0
# Where a kill landed in the preemption under way then (the latest preemptor to arrive).
PHASES = ("before the decision", "evicting", "victims terminating", "lifting gates",
          "after the gates")


@dataclass(frozen=True, slots=True)
class Seen:
    """One watch event: when the driver saw it, its type and the pod as it was then."""

    at: float
    kind: str  # ADDED, MODIFIED or DELETED
    pod: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Kept:
    """What the leader kept in the cluster for the next one, as read at `at`."""

    at: float
    data: Mapping[str, str]


@dataclass(slots=True)
class _Pod:
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
class _Preemption:
    record: PreemptionRecord
    gang: GangId
    seen: float


@dataclass
class Findings:
    kills: int = 0
    preemptions: int = 0
    victims: int = 0
    reclaimed: int = 0  # of the victims, those evicted to give borrowed GPUs back
    requeued: int = 0
    evicted_by_others: int = 0
    admissions: int = 0
    preemptions_resumed: int = 0  # finished by a later controller than the one deciding
    admissions_resumed: int = 0
    kill_phases: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PHASES, 0))
    restarts: dict[str, int] = field(default_factory=dict)
    refused: int = 0  # pod creations refused, and retried
    unreachable: int = 0  # pod creations that found no apiserver, and retried
    kept_reads: int = 0  # readings of what the leader kept
    # Members that found a placeholder in their room and landed once it was evicted.
    displaced_placeholders: int = 0
    # Seconds members waited, found unschedulable while the apiserver showed room for
    # them on the node they then landed on: the scheduler behind, not Airlock.
    placed_late: list[float] = field(default_factory=list)
    violations: dict[str, list[str]] = field(
        default_factory=lambda: {kind: [] for kind in VIOLATIONS})
    # Steps of the driver that did not happen in time (a preemptor never bound, ...).
    stalls: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not any(self.violations.values()) and not self.stalls

    def counts(self) -> dict[str, Any]:
        return {"kills": self.kills, "preemptions": self.preemptions,
                "victims": self.victims, "reclaimed": self.reclaimed,
                "requeued": self.requeued, "evictedByOthers": self.evicted_by_others,
                "admissions": self.admissions,
                "preemptionsFinishedByNextLeader": self.preemptions_resumed,
                "admissionsFinishedByNextLeader": self.admissions_resumed,
                "killsLanded": self.kill_phases, "restarts": self.restarts,
                "creationsRefused": self.refused, "creationsUnreachable": self.unreachable,
                "keptReads": self.kept_reads,
                "membersThatDisplacedAPlaceholder": self.displaced_placeholders,
                "membersPlacedLateWithRoom": len(self.placed_late),
                "longestLateSeconds": round(max(self.placed_late, default=0.0), 1),
                "violations": {k: len(v) for k, v in self.violations.items()},
                "stalls": self.stalls}

    def text(self, examples: int = 3) -> str:
        lines = [f"kills {self.kills}; preemptions {self.preemptions} ({self.victims} victim "
                 f"pods, {self.reclaimed} of them reclaimed from a borrower); admissions "
                 f"{self.admissions}; finished by the next leader: "
                 f"{self.preemptions_resumed} preemptions, {self.admissions_resumed} "
                 f"admissions; requeued pods {self.requeued}; pods evicted by others "
                 f"{self.evicted_by_others}",
                 "kills landed: " + ", ".join(f"{n} {phase}"
                                              for phase, n in self.kill_phases.items()),
                 "restarts: " + (", ".join(f"{kind} {n}" for kind, n in self.restarts.items())
                                 or "none") + f"; pod creations refused {self.refused}, "
                 f"unreachable {self.unreachable} (each retried); what the leader keeps "
                 f"read {self.kept_reads} times; members that landed once a placeholder "
                 f"was evicted from their room {self.displaced_placeholders}; members the "
                 f"scheduler placed late while their room was free "
                 f"{len(self.placed_late)} (longest "
                 f"{max(self.placed_late, default=0.0):.1f}s)"]
        for kind, found in [*self.violations.items(), ("stalled steps", self.stalls)]:
            lines.append(f"{kind}: {len(found)}")
            lines += [f"  {v}" for v in found[:examples]]
        return "\n".join(lines) + "\n"


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") in ("True", "False"):
            return dict(c)
    return None


class _Check:
    def __init__(self, nodes: Mapping[str, int], kills: Sequence[float],
                 restarts: Mapping[str, Sequence[float]]) -> None:
        self.nodes = nodes
        self.kills = sorted(kills)
        # What the soak did, to print among a pod's changes.
        self.chaos = sorted([*((at, "the controller SIGKILLed") for at in kills),
                             *((at, f"{kind} SIGKILLed and restarted")
                               for kind, times in restarts.items() for at in times)])
        self.pods: dict[str, _Pod] = {}
        self.on_node: dict[str, dict[str, int]] = {}
        self.preemptions: dict[tuple[str, float], _Preemption] = {}
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

    def life(self, at: float) -> int:
        """Which controller was running at `at`: 0 before the first kill, and so on."""
        return bisect.bisect_right(self.kills, at)

    def see(self, seen: Seen) -> None:
        raw = seen.pod
        meta = raw["metadata"]
        uid = meta["uid"]
        gang = meta.get("labels", {}).get(GANG_LABEL)
        self.seen.setdefault(uid, []).append(seen)
        if self.first_seen is None:
            self.first_seen = seen.at
        pod = self.pods.get(uid)
        if pod is None:
            pod = self.pods[uid] = _Pod(
                f"{meta['namespace']}/{meta['name']}",
                GangId(meta["namespace"], gang) if gang else None,
                pod_requests(raw["spec"]).get(GPU, 0))
            pod.placeholder = placeholder_of(raw) is not None
            if seen.kind != "DELETED" and not pod.placeholder and \
                    CLASS_LABEL not in (meta.get("labels") or {}):
                self.found.violations["pods stored without Airlock's marks"].append(
                    f"{pod.name}: stored without {CLASS_LABEL}{self.story(uid)}")
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
            pod.bound, pod.landed = seen.at, node
            if (unplaced := self.unplaced.pop(uid, None)) is not None:
                since, free = unplaced
                if self.placeholder_left.get(node, -1.0) >= since:
                    self.found.displaced_placeholders += 1
                elif free.get(node, 0) >= pod.gpus:
                    # The room was there: the scheduler's cache was behind the apiserver
                    # (its watches take up to 30 s to come back after a restart).
                    self.found.placed_late.append(seen.at - since)
                elif pod.gang is not None:
                    self.partial.setdefault(pod.gang, uid)
        if not gated(raw) and pod.ungated is None:
            pod.ungated = seen.at
        disruption = _condition(raw, "DisruptionTarget")
        if disruption is not None:
            message = str(disruption.get("message", ""))
            if pod.evicted is None:
                self._evicted(pod, seen.at, message)
            elif any(_told(reason, message) for reason in EVENT_REASONS):
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
                                            _Preemption(record, pod.gang, seen.at))
        if pod.gang and (text := annotations.get(PLACEMENT_ANNOTATION)):
            placement = peek("placement", text)
            if isinstance(placement, Record):
                self.placements.setdefault((pod.gang, placement.at), (placement, seen.at))

    def _place(self, uid: str, pod: _Pod, node: str | None, at: float) -> None:
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

    def _evicted(self, pod: _Pod, at: float, message: str) -> None:
        pod.evicted = (at, message)
        if pod.gang is not None and pod.gang not in self.running_at_eviction:
            self.running_at_eviction[pod.gang] = {
                u for u, p in self.pods.items() if p.gang == pod.gang and p.running}

    # --- after the whole history ---------------------------------------------------------
    def findings(self, events: Iterable[Mapping[str, Any]]) -> Findings:
        found = self.found
        explained = {(e.get("involvedObject") or {}).get("uid"): str(e.get("message", ""))
                     for e in events if e.get("reason") in EVENT_REASONS}
        # Victims a preemption recorded: Airlock's, whatever their condition says (the
        # controller may have died between the eviction and saying why).
        recorded = {v for p in self.preemptions.values() for v in p.record.uids}
        for uid, pod in self.pods.items():
            if pod.evicted is None:
                continue
            message = explained.get(uid, pod.evicted[1])
            if _told(PREEMPTED, message) or (uid in recorded and not _told(REQUEUED, message)):
                found.victims += 1
                found.reclaimed += RECLAIMED in message
            elif _told(REQUEUED, message):
                found.requeued += 1
            else:
                found.evicted_by_others += 1
                continue
            if uid not in explained:
                found.violations["evictions without an event"].append(
                    f"{pod.name}: evicted ({message[:60]}...) with no Event{self.story(uid)}")
        self._half_evicted()
        self._preemptors()
        self._resumed_admissions()
        self._kill_phases()
        for uid, _ in self.unplaced.items():  # never landed
            gang = self.pods[uid].gang
            if gang is not None:
                self.partial.setdefault(gang, uid)
        found.violations["partial gangs"] += [
            f"{ns}/{name}: a member found no room after its gates were lifted"
            f"{self.story(uid)}" for (ns, name), uid in sorted(self.partial.items())]
        return found

    def kept(self, readings: Sequence[Kept]) -> None:
        """What the leader kept never goes back by more than the decay since."""
        self.found.kept_reads = len(readings)
        last: tuple[float, dict[str, float], float] | None = None  # kept at, usage, read at
        for reading in readings:
            raw = load_memory("fairShare", reading.data.get(FAIR_SHARE_KEY, ""),
                              legacy=lambda raw: raw)
            if raw is None:
                continue
            at, usage = float(raw["at"]), {str(q): float(u) for q, u in raw["usage"].items()}
            if last is not None:
                decay = 0.5 ** (max(at - last[0], 0.0) / HALF_LIFE)
                lost = sorted(q for q, u in last[1].items()
                              if usage.get(q, 0.0) < u * decay - 1e-6)
                if at < last[0] or lost:
                    self.found.violations["fair-share usage lost"].append(
                        f"read at {self.since(reading.at)}: kept at {at:.1f} (before: "
                        f"{last[0]:.1f}, read at {self.since(last[2])}), usage of "
                        f"{', '.join(lost) or 'no queue'} below the last reading's: "
                        f"{usage} after {last[1]}")
            last = (at, usage, reading.at)

    def _half_evicted(self) -> None:
        for gang, running in sorted(self.running_at_eviction.items()):
            kept = sorted((self.pods[u].name, u) for u in running
                          if self.pods[u].evicted is None)
            if kept:
                self.found.violations["half-evicted gangs"].append(
                    f"{gang[0]}/{gang[1]}: {', '.join(n for n, _ in kept)} not evicted with "
                    f"the rest{self.story(kept[0][1])}")

    def _members(self, gang: GangId, record: Record) -> list[_Pod]:
        return [p for p in self.pods.values() if p.gang == gang
                and p.name.split("/", 1)[1] in record.members]

    def _admission(self, preemption: _Preemption) -> tuple[Record, float] | None:
        """The preemptor's admission after its preemption, and when it was seen."""
        admitted = [(record, seen) for (gang, _), (record, seen) in self.placements.items()
                    if gang == preemption.gang and record.at >= preemption.record.at]
        return min(admitted, key=lambda a: a[0].at) if admitted else None

    def _marked(self, preemption: _Preemption) -> list[float]:
        """When its victims were marked for eviction, after the record."""
        return [at for u in preemption.record.uids if (pod := self.pods.get(u)) is not None
                and pod.evicted is not None and _told(PREEMPTED, pod.evicted[1])
                and (at := pod.evicted[0]) >= preemption.seen]

    def _preemptors(self) -> None:
        found = self.found
        found.preemptions = len(self.preemptions)
        for preemption in sorted(self.preemptions.values(), key=lambda p: p.seen):
            marked = self._marked(preemption)
            if not marked:
                continue
            if max(self.life(at) for at in marked) > self.life(preemption.seen):
                found.preemptions_resumed += 1
            why = self._not_admitted_next(preemption, min(marked))
            if why:
                found.violations["victims without their preemptor admitted next"].append(
                    f"{preemption.gang[0]}/{preemption.gang[1]} evicted {len(marked)} pods: "
                    f"{why}")
        # Each victim must be named in a decision recorded before it was marked.
        named = {u for p in self.preemptions.values() for u in p.record.uids
                 if (pod := self.pods.get(u)) is not None and pod.evicted is not None
                 and pod.evicted[0] >= p.seen}
        for uid, pod in self.pods.items():
            if pod.evicted and _told(PREEMPTED, pod.evicted[1]) and uid not in named:
                found.violations["victims without their preemptor admitted next"].append(
                    f"{pod.name}: evicted for a preemption no earlier record names")

    def _not_admitted_next(self, preemption: _Preemption, first_eviction: float) -> str:
        """Why the preemptor was not admitted into the room made for it, or ''."""
        admission = self._admission(preemption)
        if admission is None:
            return "the preemptor was never admitted"
        record, seen = admission
        members = self._members(preemption.gang, record)
        if len(members) < len(record.members) or any(p.bound is None for p in members):
            return "the preemptor was admitted but not every member was bound"
        held = set(preemption.record.nodes)
        # Placeholders are not let onto nodes: never gated, the scheduler puts them in
        # free room, and evicts them (priority -1) for the preemptor.
        taken = sorted(p.name for p in self.pods.values()
                       if p.gang != preemption.gang and not p.placeholder
                       and p.landed in held and p.ungated is not None
                       and first_eviction <= p.ungated <= seen)
        if taken:
            return f"{', '.join(taken)} let onto the held nodes before the preemptor"
        return ""

    def _resumed_admissions(self) -> None:
        found = self.found
        found.admissions = len(self.placements)
        for (gang, _), (record, seen) in self.placements.items():
            life = self.life(seen)
            if any(p.ungated is not None and self.life(p.ungated) > life
                   for p in self._members(gang, record)):
                found.admissions_resumed += 1

    def _kill_phases(self) -> None:
        for at in self.kills:
            arrived = [p for p in self.preemptions.values() if self.arrived[p.gang] <= at]
            if not arrived:
                self.found.kill_phases[PHASES[0]] += 1
                continue
            preemption = max(arrived, key=lambda p: (self.arrived[p.gang], p.seen))
            admission = self._admission(preemption)
            ungated = [p.ungated or float("inf") for p in
                       self._members(preemption.gang, admission[0])] if admission else []
            ends = (preemption.seen, max(self._marked(preemption), default=preemption.seen),
                    admission[1] if admission else float("inf"),
                    max(ungated, default=float("inf")))
            self.found.kill_phases[PHASES[bisect.bisect_right(ends, at)]] += 1


def check(history: Iterable[Seen], nodes: Mapping[str, int], events: Iterable[Mapping[str, Any]],
          kills: Sequence[float], kept: Sequence[Kept] = (),
          orphans: Sequence[str] = (),
          restarts: Mapping[str, Sequence[float]] | None = None) -> Findings:
    """`nodes`: each node's GPUs; `events`: the Events of the soak's namespaces;
    `kills`: when the controller was killed; `kept`: what the leader kept for the next,
    read through the run; `orphans`: placeholders left once every gang was gone;
    `restarts`: when each part was restarted."""
    checking = _Check(nodes, kills, restarts or {})
    for seen in history:
        checking.see(seen)
    checking.kept(kept)
    found = checking.findings(events)
    found.violations["orphaned capacity requests"] += [
        f"{name}: still there once every gang was gone" for name in orphans]
    return found
