"""What `kubectl airlock why` says of a pod or a workload: for each of its gangs, the
entry `airlock status -o json` lists it with (queue, reason, message: the controller's own
dry run), what holds it back and what would let it start; for each of its pods Airlock
does not govern, why not. Pure: the pods' facts and the status report come in.

A line of the text is one row of `_rows`, read off the gang's status entry: a key the
report gains (a predicted start) is shown by adding its row there."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.controller.core.reasons import MEANING

# What each reason `airlock status` gives means: the controller's wait reasons, and the
# two it lists gangs about to go with.
MEANINGS: Final[Mapping[str, str]] = {
    **{str(reason): meaning for reason, meaning in MEANING.items()},
    "Admissible": "the gang fits now, and the controller's next round admits it",
    "Preempting": "the gang goes once the lower-priority or borrowing gangs named are "
                  "evicted, after the policy's delay",
}
# What would let a gang waiting for each reason start.
TO_START: Final[Mapping[str, str]] = {
    "Incomplete": "the rest of its pods being created (see its workload's controller and "
                  "events)",
    "SizeUnknown": "a size Airlock can read: its owner kind installed, or its pods stating "
                   "one size",
    "Oversize": "nothing: this pod is beyond the gang's size; delete it or raise the size",
    "BehindHead": "the head of its queue starting first",
    "BackingOff": "its requeue backoff ending (the policy's preemption.requeueBackoff)",
    "NoRoom": "GPUs freeing on nodes it may use (running work ending), or more nodes",
    "NoDomainFits": "one topology domain with room for all of it: work there ending, more "
                    "nodes, or a looser topology (preferred-topology)",
    "NeverFits": "more nodes than the cluster has (the message says what it needs), or a "
                 "smaller gang or a looser topology",
    "OverQuota": "its queue's use falling (its running gangs ending), or a larger nominal "
                 "quota or borrowing limit",
    "AwaitingVictims": "the gangs it preempted being gone; the room is held for it",
    "AwaitingCapacity": "the nodes asked of the cluster's autoscaler arriving",
    "Growing": "room freeing in its domain (an elastic gang grows, never by preemption)",
    "Invalid": "its pods recreated without the value the message names",
    "Admissible": "nothing: the controller admits it in its next round",
    "Preempting": "the policy's preemption delay passing; then its victims are evicted",
}
# Reasons where the gangs about to start ahead of it take the room first.
_ROOM: Final = frozenset({"NoRoom", "NoDomainFits", "Growing", "AwaitingCapacity"})


@dataclass(frozen=True, slots=True)
class PodFacts:
    """One pod as `why` reads it: whether Airlock governs it and why (or why not), its
    unit as the status report names it (`ns/gang`, `pod ns/name`), and its state."""

    name: str
    governed: bool
    why: str
    unit: str | None
    state: str
    # The controller's latest event on the pod ("Reason: message"), if the user may read it.
    told: str | None = None


@dataclass(frozen=True, slots=True)
class GangView:
    gang: str
    pods: tuple[PodFacts, ...]
    # The status report's entry of the gang, None when it is not waiting.
    waiting: Mapping[str, Any] | None
    blockers: tuple[str, ...] = ()
    to_start: str | None = None


@dataclass(frozen=True, slots=True)
class Verdict:
    subject: str
    gangs: tuple[GangView, ...]
    ungoverned: tuple[PodFacts, ...] = field(default=())

    @property
    def governed(self) -> bool:
        return bool(self.gangs)

    def as_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "governed": self.governed,
                "gangs": [{"gang": g.gang, "pods": [p.name for p in g.pods],
                           "state": _state(g), "waiting": g.waiting,
                           "blockers": list(g.blockers), "toStart": g.to_start}
                          for g in self.gangs],
                "notGoverned": [{"pod": p.name, "why": p.why} for p in self.ungoverned]}

    def text(self) -> str:
        if not self.governed:
            whys = sorted({p.why for p in self.ungoverned})
            if len(whys) == 1:
                return f"{self.subject}: not governed by Airlock: {whys[0]}\n"
            return "\n".join([f"{self.subject}: not governed by Airlock",
                              *(f"  pod {p.name}: {p.why}" for p in self.ungoverned)]) + "\n"
        blocks = []
        for gang in self.gangs:
            width = max(len(label) for label, _ in _rows(gang))
            blocks.append("\n".join(f"{label + ':':<{width + 1}} {value}"
                                    for label, value in _rows(gang)))
        if self.ungoverned:
            blocks.append("\n".join(["Not governed by Airlock:",
                                     *(f"  pod {p.name}: {p.why}" for p in self.ungoverned)]))
        return f"{self.subject}\n" + "\n\n".join(blocks) + "\n"


def _state(gang: GangView) -> str:
    if gang.waiting is not None:
        return "waiting"
    states = sorted({p.state for p in gang.pods})
    return "; ".join(states)


def _rows(gang: GangView) -> list[tuple[str, str]]:
    entry = gang.waiting
    if entry is None:
        # Not in the dry run (a gang whose size only its owner states is sized by the
        # controller alone): what the controller last told its pods says why.
        told = next((p.told for p in gang.pods if p.told), None)
        return [("Gang", gang.gang), ("Pods", str(len(gang.pods))),
                ("State", _state(gang)),
                *([("Last event", told)] if told else [])]
    reason = str(entry.get("reason", ""))
    return [("Gang", f"{gang.gang} ({entry.get('pods')} pods, {entry.get('gpus', 0):g} GPUs, "
                     f"priority {entry.get('priority')})"),
            ("Queue", str(entry.get("queue", ""))),
            ("Reason", f"{reason}: {MEANINGS.get(reason, '')}"),
            ("Message", str(entry.get("why", ""))),
            *([("Starts", _predicted(entry))] if "predictedStart" in entry else []),
            ("Blockers", "; ".join(gang.blockers) or "none named"),
            ("To start", gang.to_start or "")]


def _predicted(entry: Mapping[str, Any]) -> str:
    """The report's predicted start: the time, or unknown and the gang that makes it so
    (docs/predictions.md)."""
    if entry.get("predictedStart"):
        return str(entry["predictedStart"])
    blocker = entry.get("predictionBlocker")
    return f"unknown ({blocker} runs with no known end)" if blocker else "unknown"


def blockers(entry: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, ...]:
    """What holds the gang back, as the report shows it: the head of its queue, its
    queue's use, or the gangs ahead of it that take the room first."""
    waiting: Sequence[Mapping[str, Any]] = status.get("waiting") or []
    ahead = waiting[:next((i for i, w in enumerate(waiting) if w is entry), len(waiting))]
    reason, queue = entry.get("reason"), entry.get("queue")
    if reason == "BehindHead":
        head = next((w for w in ahead if w.get("queue") == queue), None)
        return (f"{head['gang']}, the head of queue {queue} ({head.get('reason')})",) \
            if head else ()
    if reason == "OverQuota":
        line = next((q for q in status.get("queues") or [] if q.get("name") == queue), None)
        return (f"queue {queue} uses {line['used']:g} GPUs: nominal {line['nominal']:g}, "
                f"{line['borrowed']:g} borrowed",) if line else ()
    if reason in _ROOM:
        return tuple(f"{w['gang']} ({w.get('reason')}) goes first" for w in ahead
                     if w.get("reason") in ("Admissible", "Preempting"))
    return ()


def judge(subject: str, pods: Sequence[PodFacts], status: Mapping[str, Any]) -> Verdict:
    """The verdict on `subject` from its pods and the status report (its JSON)."""
    entries = {str(w.get("gang")): w for w in status.get("waiting") or []}
    units: dict[str, list[PodFacts]] = {}
    for pod in pods:
        if pod.governed and pod.unit:
            units.setdefault(pod.unit, []).append(pod)
    gangs = []
    for unit, members in units.items():
        entry = entries.get(unit)
        gangs.append(GangView(
            unit, tuple(members), entry,
            blockers(entry, status) if entry else (),
            TO_START.get(str(entry.get("reason"))) if entry else None))
    # A governed pod in no unit (bound, or one the controller does not queue) says its
    # state as its own gang line.
    gangs += [GangView(f"pod {p.name}", (p,), None) for p in pods if p.governed and not p.unit]
    return Verdict(subject, tuple(gangs), tuple(p for p in pods if not p.governed))
