"""The life of each gang and queued single pod, as a log pipeline keeps it for weeks: one
event when it is admitted (Airlock's gate comes off), started (all its pods run),
preempted (Airlock evicted a pod of it) and ended (none of its pods runs any more).

Read from the pods as the watches deliver them, so it needs nothing of the rounds and is
the same whoever leads; the clock is passed in. The controller logs these events
(`shells.lifecycling`); `airlock record` reads them from that log, or from a watch of its
own, into a trace `airlock simulate` replays."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.resources import Resources
from webhook.keys import CLASS_LABEL
from webhook.pools import PRODUCT_LABEL, model_name

# The logger the controller writes the events under: what a log pipeline keeps, and what
# `airlock record --from-log` reads.
LIFECYCLE_LOGGER = "airlock.lifecycle"
EventName = Literal["admitted", "started", "preempted", "ended"]
EVENTS: tuple[EventName, ...] = ("admitted", "started", "preempted", "ended")
# What a victim's DisruptionTarget message is cut to: a user may not fill the log.
_REASON_MAX = 200


def gpu_model(policy_model: str | None, labels: Mapping[str, str]) -> str | None:
    """What a node's GPUs are called: the policy's model (`spec.gpuModels`) where it names
    one, else the name of GPU feature discovery's product label (`model_name`)."""
    if policy_model is not None:
        return policy_model
    product = labels.get(PRODUCT_LABEL)
    return model_name(product) if product else None


@dataclass(frozen=True, slots=True)
class LifeEvent:
    event: EventName
    unit: UnitId
    cls: str
    # The unit's pods, and each one's GPUs (the most any of them asks for).
    pods: int
    gpus: GpuEquivalents | float
    model: str | None
    submitted: float
    at: float
    # When its run began: on `started`, `preempted` and `ended`.
    started: float | None = None
    # Why: a preemption's message; how it ended (Succeeded, Failed, Deleted).
    reason: str | None = None

    def fields(self) -> dict[str, Any]:
        """The log line's fields. Seconds since the epoch: a log pipeline's clock-free
        numbers, which `airlock record` reads back."""
        out: dict[str, Any] = {
            "event": self.event, "namespace": self.unit.namespace, "unit": self.unit.name,
            "unitKind": self.unit.kind, "class": self.cls, "pods": self.pods,
            "gpus": int(self.gpus) if self.gpus == int(self.gpus) else float(self.gpus),
            "model": self.model, "submitTime": self.submitted}
        if self.event == "admitted":
            out["admitTime"] = self.at
        elif self.event == "started":
            out["startTime"] = self.at
        else:
            out["endTime"] = self.at
            if self.started is not None:
                out |= {"startTime": self.started, "runtime": round(self.at - self.started, 3)}
        if self.reason is not None:
            out["reason"] = self.reason
        return out


@dataclass(slots=True)
class _Unit:
    cls: str
    submitted: float
    pods: dict[str, PodInfo] = field(default_factory=dict)
    # Its active pods, and those of them running; kept as pods change, so a pod's change
    # costs the same in a gang of thousands.
    active: int = 0
    running: int = 0
    # The most pods it had active at once: its size, where no pod states one.
    most: int = 0
    # The latest start of a pod of it: its own start, once all run.
    latest: float = 0.0
    admitted: bool = False
    started: float | None = None
    model: str | None = None

    def count(self, pod: PodInfo | None, sign: int) -> None:
        if pod is None or not pod.active:
            return
        self.active += sign
        if pod.started and not pod.gated:
            self.running += sign
            self.latest = max(self.latest, pod.started)
        self.most = max(self.most, self.active)


def unit_of(pod: PodInfo) -> UnitId:
    gang = pod.gang_id
    return UnitId.of_gang(gang) if gang is not None else UnitId.of_pod(pod.key)


class Lifecycle:
    """`gpus`: a pod's GPUs from its requests; `model_of`: a node's model, or None."""

    def __init__(self, gpus: Callable[[Resources], GpuEquivalents],
                 model_of: Callable[[str], str | None]) -> None:
        self.gpus = gpus
        self.model_of = model_of
        self.units: dict[UnitId, _Unit] = {}
        self._unit_of: dict[PodKey, UnitId] = {}

    def followed(self) -> list[PodKey]:
        return list(self._unit_of)

    def put(self, pod: PodInfo, now: float) -> list[LifeEvent]:
        """A pod as it is now: the events it brings about."""
        cls = pod.labels.get(CLASS_LABEL)
        followed = cls is not None and pod.invalid is None and self.gpus(pod.requests) > 0
        if not followed:
            return self.drop(pod.key, now)
        unit_id = unit_of(pod)
        if self._unit_of.get(pod.key, unit_id) != unit_id:
            self.drop(pod.key, now)
        unit = self.units.get(unit_id)
        if unit is None:
            if not pod.active:  # it ended before we saw it run
                return []
            unit = self.units[unit_id] = _Unit(cls=str(cls), submitted=pod.created)
        before = unit.pods.get(pod.name)
        unit.pods[pod.name] = pod
        unit.count(before, -1)
        unit.count(pod, 1)
        self._unit_of[pod.key] = unit_id
        unit.submitted = min(unit.submitted, pod.created or unit.submitted)
        return self._changed(unit_id, unit, before, pod, now)

    def drop(self, key: PodKey, now: float) -> list[LifeEvent]:
        """A pod that is gone."""
        unit_id = self._unit_of.pop(key, None)
        if unit_id is None:
            return []
        unit = self.units[unit_id]
        unit.count(unit.pods.pop(key.name, None), -1)
        events = self._changed(unit_id, unit, None, None, now)
        if not unit.pods:
            del self.units[unit_id]
        return events

    def _changed(self, unit_id: UnitId, unit: _Unit, before: PodInfo | None,
                 pod: PodInfo | None, now: float) -> list[LifeEvent]:
        events: list[LifeEvent] = []

        def tell(event: EventName, at: float, reason: str | None = None) -> None:
            events.append(self._event(unit_id, unit, event, at, reason))

        if before is not None and pod is not None and before.gated and not pod.gated \
                and not unit.admitted:
            unit.admitted = True
            tell("admitted", now)
        evicted = pod.recorded.evicted_for if pod is not None else None
        if evicted and before is not None and not before.deleting and \
                (unit.admitted or unit.started is not None):
            tell("preempted", now, evicted[:_REASON_MAX])
            unit.admitted, unit.started = False, None
        if unit.started is None and unit.active and unit.running == unit.active and \
                unit.active >= _least(unit, pod):
            unit.started = unit.latest
            unit.model = next(filter(None, (self.model_of(p.node_name)
                                            for p in unit.pods.values()
                                            if p.active and p.node_name)), None)
            tell("started", unit.started)
        if unit.started is not None and not unit.active:
            tell("ended", now, _outcome(unit))
            unit.admitted, unit.started = False, None
        return events

    def _event(self, unit_id: UnitId, unit: _Unit, event: EventName, at: float,
               reason: str | None) -> LifeEvent:
        gpus = max((self.gpus(p.requests) for p in unit.pods.values()), default=0)
        return LifeEvent(event=event, unit=unit_id, cls=unit.cls,
                         pods=unit.most,
                         gpus=gpus, model=unit.model, submitted=unit.submitted, at=at,
                         started=unit.started, reason=reason)


def _least(unit: _Unit, pod: PodInfo | None) -> int:
    """The pods it runs with: an elastic gang's minimum, the size its pods state, else
    the most it had at once."""
    marks = pod.marks if pod is not None else None
    return (marks and (marks.min_size or marks.expected_size)) or unit.most


def _outcome(unit: _Unit) -> str:
    ended = list(unit.pods.values())
    if ended and all(p.succeeded for p in ended):
        return "Succeeded"
    return "Failed" if any(p.terminal and not p.succeeded for p in ended) else "Deleted"
