"""What a round of decisions asks the applier to do, and what to tell about it. Data,
plus the one exhaustive `match` that turns an action into events: a new kind of action
that is not handled here, in the applier and in the runner fails type checking.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, NamedTuple, assert_never

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.identities import GangId, UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.reasons import WaitReason, lead
from webhook.controller.core.records import PreemptionRecord, Record

EventReason = Literal["Admitted", "Resumed", "Preempted", "Preempting", "PreemptionNotice",
                      "Requeued", "Replanned",
                      "RecordIgnored", "CapacityRequested", "CapacityProvisioned",
                      "CapacityExpired", "CapacityFailed", "PredictedStart", WaitReason]
EventType = Literal["Normal", "Warning"]
# Why a victim may go: it has a lower priority, its queue gives back borrowed GPUs, it
# was backfilled onto the room reserved for the head of the queue and ran past its end, or
# it is moved out of a domain the head needs whole (and made again elsewhere).
Cause = Literal["priority", "reclaim", "backfill", "move"]
# (pod name, node): the nodes to write as a gated gang's pods' nominated nodes.
Nominations = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class Admit:
    """Record the decision on `anchor` (with the anchor's own ungate, in one patch), then
    ungate the rest of `ungate`."""

    unit: UnitId
    record: Record
    anchor: PodInfo
    ungate: tuple[PodInfo, ...]
    gpus: GpuEquivalents
    note: str = ""
    # (pod name, node) to write as the pods' nominated node before they are ungated.
    nominate: Nominations = ()
    # (key, value) to write on each pod as its gate is lifted: the annotations that
    # consume the room a ProvisioningRequest booked for it.
    annotations: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Finish:
    """Ungate members an earlier, recorded decision named (the record already exists)."""

    unit: UnitId
    record: Record
    ungate: tuple[PodInfo, ...]
    gpus: GpuEquivalents


@dataclass(frozen=True, slots=True)
class Wait:
    unit: UnitId
    pods: tuple[PodInfo, ...]
    reason: WaitReason
    detail: str
    warning: bool = False
    # It fits no domain of today's nodes while its queue may admit it: more nodes would
    # let it in (capacity requests, `growing`).
    may_grow: bool = False
    # The head of the queue: the domain reserved for it, reserved again next round
    # (`placement.reservation`).
    reserves: str | None = None
    # The GPU model it waits for room of, where policy names models: what a capacity
    # request asks for.
    model: str | None = None
    # Its pods still nominated to nodes of a hold that ended unused: nominations to forget,
    # or kube-scheduler keeps that room from every pod of no higher priority.
    unnominate: tuple[PodInfo, ...] = ()

    @property
    def message(self) -> str:
        return f"{lead(self.reason, self.warning)}: {self.detail}"


class Victim(NamedTuple):
    """A unit of preemption: a whole gang (every active member), or one pod in none or
    above its elastic gang's minimum, weighed by the victim order's terms (`criteria`).
    A NamedTuple: a round builds one for every unit in a busy cluster (tens of
    thousands), and a tuple costs a third of a frozen dataclass to build."""

    pods: tuple[PodInfo, ...]
    unit: UnitId
    queue: str
    priority: int
    gpus: GpuEquivalents
    # GPU-seconds of work lost: since each pod's start or last stated checkpoint; for a
    # pod above an elastic gang's minimum, every member's (`candidates.restarted`).
    lost: float
    # The latest start among its pods: its age, for "youngest first".
    started: float
    cause: Cause = "priority"
    # Backfilled onto the head's room and past the end it was admitted on: that end.
    overran: float | None = None

    @property
    def restarts(self) -> GangId | None:
        """The elastic gang this pod above its minimum restarts when it goes: its `lost`
        is that gang's, once however many of its pods go (`lost_of`)."""
        return self.pods[0].gang_id if self.unit.kind == "pod" else None


def lost_of(victims: Iterable[Victim]) -> float:
    """GPU-seconds evicting all of `victims` loses: an elastic gang restarts once, however
    many of its pods above its minimum go."""
    total = 0.0
    restarted: dict[GangId, float] = {}
    for v in victims:
        if (gang := v.restarts) is None:
            total += v.lost
        else:
            restarted[gang] = max(restarted.get(gang, 0.0), v.lost)
    return total + sum(restarted.values())


@dataclass(frozen=True, slots=True)
class Preempt:
    """Record `record` on the preemptor's `anchor`, then evict every victim pod (a
    `DisruptionTarget` condition, then delete) and tell the `noticed` ones to checkpoint
    by `notice_until` (`preemption.notices`). The preemptor stays gated: it is admitted in
    a later round, into the room held for it."""

    unit: UnitId
    anchor: PodInfo
    record: PreemptionRecord
    preemptor: tuple[PodInfo, ...]
    victims: tuple[Victim, ...]
    priority: int
    queue: str
    noticed: tuple[Victim, ...] = ()
    notice_until: float | None = None
    # Why in this domain, or spread, for a gang that prefers one domain.
    note: str = ""
    # (pod name, node) of the preemptor, written as nominated before the victims go, so
    # kube-scheduler keeps the room they free from pods of no higher priority.
    nominate: Nominations = ()

    @property
    def gpu_hours(self) -> float:
        return lost_of(self.victims) / 3600


@dataclass(frozen=True, slots=True)
class Requeue:
    """Evict what is left of a gang that lost members and stayed short of them past the
    grace period (each pod marked `DisruptionTarget`, then deleted): it frees the GPUs
    it cannot use, and its owner's new pods queue as a whole gang again."""

    unit: UnitId
    pods: tuple[PodInfo, ...]
    present: int
    size: int
    short_for: float


@dataclass(frozen=True, slots=True)
class Replan:
    """Evict `pod`, let go pinned to `node`, which can no longer take it before it is
    bound: its gate cannot be put back, nor its pin changed, so it goes, and the owner
    that makes it again has the new pod decided afresh. Only for a pod Airlock pinned
    (`placement.pins`)."""

    unit: UnitId
    pod: PodInfo
    node: str
    why: str


@dataclass(frozen=True, slots=True)
class Ignore:
    """A record the controller does not act on: one it cannot prove it wrote, or a
    recorded victim the checks of a fresh plan now keep. Nothing is written; its event
    says why, on `pods`."""

    unit: UnitId
    pods: tuple[PodInfo, ...]
    message: str


Action = Admit | Finish | Wait | Preempt | Requeue | Replan | Ignore


@dataclass(frozen=True, slots=True)
class Event:
    """What to tell about an action: one event on each of `pods`."""

    pods: tuple[PodInfo, ...]
    type: EventType
    reason: EventReason
    message: str


def _lifted(verb: str, action: Admit | Finish, note: str = "") -> str:
    record = action.record
    where = f"domain {record.domain}" if record.domain else "any domain"
    return f"{verb}: {where}; {len(action.ungate)} pods, {action.gpus} GPUs{note}"


# Why a victim is evicted when its queue's lender takes its GPUs back, as its event says.
RECLAIMED = "its queue borrowed GPUs their owner now reclaims"


def rfc3339(at: float) -> str:
    """A time as the preemption notice and the predicted start state it (RFC 3339, UTC)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def _clock(at: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(at))


def _cause(victim: Victim, preemptor: UnitId, now: float) -> str:
    if victim.cause == "reclaim":
        return RECLAIMED
    if victim.cause == "move":
        return (f"moved: the first in the queue, {preemptor}, needs one domain whole, and "
                f"few GPUs moved free one; its owner makes it again, and Airlock places it "
                f"outside that domain")
    if victim.cause == "backfill" and victim.overran is not None:
        return (f"it was backfilled onto the room reserved for the first in the queue until "
                f"{_clock(victim.overran)}, and overran that by "
                f"{(now - victim.overran) / 60:.0f} min")
    return f"a {preemptor.kind} of higher priority needs the room"


def _where(record: PreemptionRecord) -> str:
    return f"domain {record.domain}" if record.domain else "any domain"


def retold(anchor: PodInfo, record: PreemptionRecord) -> str:
    """Why a victim the record names is going, told by a leader that did not evict it
    (the one that did stopped before it could say so)."""
    return (f"Preempted: evicted to make room for gang {anchor.namespace}/{anchor.marks.gang} in "
            f"{_where(record)} (told by the next leader: the one that evicted it stopped "
            f"first)")


def _preempted(action: Preempt) -> tuple[Event, ...]:
    where = _where(action.record)
    told = [Event(v.pods, "Warning", "Preempted",
                  f"Preempted: {_cause(v, action.unit, action.record.at)}; evicted to "
                  f"make room for "
                  f"{action.unit} "
                  f"(priority {action.priority}, queue {action.queue}) in {where}, losing "
                  f"{v.lost / 3600:.1f} GPU-hours")
            for v in action.victims]
    if action.noticed and action.notice_until is not None:
        until = rfc3339(action.notice_until)
        told.extend(Event(v.pods, "Warning", "PreemptionNotice",
                          f"PreemptionNotice: {_cause(v, action.unit, action.record.at)}; "
                          f"save your work and set gpu-airlock.io/checkpointed-at (or exit): "
                          f"evicted then, or at {until}, to make room for {action.unit} in "
                          f"{where}") for v in action.noticed)
    names = ", ".join(str(v.unit) for v in action.victims)
    doing = [f"evicting {names}"] if action.victims else []
    if action.noticed and action.notice_until is not None:
        doing.append(f"told {', '.join(str(v.unit) for v in action.noticed)} to checkpoint "
                     f"by {rfc3339(action.notice_until)}")
    lost = f", losing {action.gpu_hours:.1f} GPU-hours" if action.victims else ""
    why = f" ({action.note})" if action.note else ""
    told.append(Event(action.preemptor, "Normal", "Preempting",
                      f"Preempting: {'; '.join(doing)} to make room in {where}{lost}{why}"))
    return tuple(told)


def events_of(action: Action) -> tuple[Event, ...]:
    """What to tell, and to which pods, about an action."""
    match action:
        case Admit():
            return (Event(action.ungate, "Normal", "Admitted",
                          _lifted("Admitted", action, action.note)),)
        case Finish():
            return (Event(action.ungate, "Normal", "Resumed",
                          _lifted("Resumed", action)),)
        case Wait():
            return (Event(action.pods, "Warning" if action.warning else "Normal",
                          action.reason, action.message),)
        case Preempt():
            return _preempted(action)
        case Ignore():
            return (Event(action.pods, "Warning", "RecordIgnored", action.message),)
        case Requeue():
            return (Event(action.pods, "Warning", "Requeued",
                          f"Requeued: the gang has {action.present} of its {action.size} "
                          f"members, for {action.short_for:.0f}s; the rest is evicted so it "
                          f"starts again whole"),)
        case Replan():
            return (Event((action.pod,), "Warning", "Replanned",
                          f"Replanned: node {action.node}, where Airlock pinned it, "
                          f"{action.why}, and it is not bound yet; evicted so that its "
                          f"owner makes it again and it is placed afresh"),)
        case _:
            assert_never(action)

