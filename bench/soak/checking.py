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
from dataclasses import dataclass
from typing import Any

from bench.soak.findings import PHASES, Findings
from bench.soak.replaying import (
    EVENT_REASONS,
    PREEMPTED,
    REQUEUED,
    Pod,
    Preemption,
    Replay,
    Seen,
    told,
)
from webhook.controller.core.actions import RECLAIMED
from webhook.controller.core.identities import GangId
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.core.records import Record, load_memory

# The policy's default fair-share half-life: how fast kept usage may shrink.
HALF_LIFE = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class Kept:
    """What the leader kept in the cluster for the next one, as read at `at`."""

    at: float
    data: Mapping[str, str]


class _Check(Replay):
    """The replayed history, judged once it is all in."""

    def life(self, at: float) -> int:
        """Which controller was running at `at`: 0 before the first kill, and so on."""
        return bisect.bisect_right(self.kills, at)

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
            if told(PREEMPTED, message) or (uid in recorded and not told(REQUEUED, message)):
                found.victims += 1
                found.reclaimed += RECLAIMED in message
            elif told(REQUEUED, message):
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

    def _members(self, gang: GangId, record: Record) -> list[Pod]:
        return [p for p in self.pods.values() if p.gang == gang
                and p.name.split("/", 1)[1] in record.members]

    def _admission(self, preemption: Preemption) -> tuple[Record, float] | None:
        """The preemptor's admission after its preemption, and when it was seen."""
        admitted = [(record, seen) for (gang, _), (record, seen) in self.placements.items()
                    if gang == preemption.gang and record.at >= preemption.record.at]
        return min(admitted, key=lambda a: a[0].at) if admitted else None

    def _marked(self, preemption: Preemption) -> list[float]:
        """When its victims were marked for eviction, after the record."""
        return [at for u in preemption.record.uids if (pod := self.pods.get(u)) is not None
                and pod.evicted is not None and told(PREEMPTED, pod.evicted[1])
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
            if pod.evicted and told(PREEMPTED, pod.evicted[1]) and uid not in named:
                found.violations["victims without their preemptor admitted next"].append(
                    f"{pod.name}: evicted for a preemption no earlier record names")

    def _not_admitted_next(self, preemption: Preemption, first_eviction: float) -> str:
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
