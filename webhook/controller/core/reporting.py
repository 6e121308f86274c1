"""What `airlock status` shows, from a listing of the cluster and the policy: the queues
(nominal, used, borrowed, share of use now; and per GPU model, where policy names models),
the waiting gangs in admission order with why each waits (the controller's own decision
core, run as a dry run) and when each is expected to start (that round played forward:
`forecasting`), the gangs running on room backfilled from the head of the queue
(until when, and whether they overran it), and the recent preemptions (the controller's
`Preempting` events). Pure; `statusing` lists and prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, assert_never

from webhook.controller.core.actions import (
    Admit,
    Finish,
    Ignore,
    Preempt,
    Replan,
    Requeue,
    Wait,
    rfc3339,
)
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.configuring import quotas_of
from webhook.controller.core.forecasting import UNKNOWN, Prediction
from webhook.controller.core.gangs import membership
from webhook.controller.core.growth.asking import Asking
from webhook.controller.core.identities import UnitId
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.core.queues.modelquotas import ModelUsage, model_usage
from webhook.controller.core.queues.quotas import Quotas, holding
from webhook.controller.core.reasons import WaitReason
from webhook.controller.core.rounds import Rounds
from webhook.policy.model import Policy

# Preemptions shown, newest first.
RECENT = 20


@dataclass(frozen=True, slots=True)
class QueueLine:
    name: str
    nominal: float
    used: float
    borrowed: float
    weight: float
    # Decayed GPU-seconds / weight, as the leader last kept it (None: not kept yet).
    share: float | None


# Why a gang is listed: why it waits, or that it is about to go (`Admissible`) or to
# preempt once the policy's delay has passed (`Preempting`).
LineReason = WaitReason | Literal["Admissible", "Preempting"]


@dataclass(frozen=True, slots=True)
class GangLine:
    gang: str
    queue: str
    priority: int
    pods: int
    gpus: float
    reason: LineReason
    why: str
    # RFC 3339 UTC, None when unknown; then the gang ("ns/name") whose unknown end is why.
    predicted_start: str | None = None
    blocker: str | None = None

    def as_json(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        del out["predicted_start"], out["blocker"]
        return {**out, "predictedStart": self.predicted_start,
                "predictionBlocker": self.blocker}

    @property
    def start(self) -> str:
        """The STARTS column: the time, or unknown and why."""
        if self.predicted_start is not None:
            return self.predicted_start
        return f"unknown ({self.blocker} has no known end)" if self.blocker else "unknown"


@dataclass(frozen=True, slots=True)
class PreemptionLine:
    at: str
    preemptor: str
    message: str


@dataclass(frozen=True, slots=True)
class BackfillLine:
    """A gang let onto the room reserved for the head of the queue, and when it was expected
    to end; past then (`overran`), it is the first victim when the head is ready."""

    gang: str
    queue: str
    until: str
    overran: bool


@dataclass(frozen=True, slots=True)
class CapacityLine:
    """An open capacity request: its placeholders, what the gang asks for, since when."""

    gang: str
    mode: str
    pods: int
    gpus: float
    state: str
    age: float


@dataclass(frozen=True, slots=True)
class Report:
    queues: tuple[QueueLine, ...]
    waiting: tuple[GangLine, ...]
    preemptions: tuple[PreemptionLine, ...]
    capacity: tuple[CapacityLine, ...] = ()
    backfilled: tuple[BackfillLine, ...] = ()
    models: tuple[ModelUsage, ...] = ()
    # GPU models policy names that no node has the labels of: most likely a typo.
    unmatched: tuple[str, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"queues": [dataclasses.asdict(q) for q in self.queues],
                "waiting": [g.as_json() for g in self.waiting],
                "preemptions": [dataclasses.asdict(p) for p in self.preemptions],
                "capacityRequests": [dataclasses.asdict(c) for c in self.capacity],
                "backfilled": [dataclasses.asdict(b) for b in self.backfilled],
                "models": [dataclasses.asdict(m) for m in self.models],
                "modelsWithoutNodes": list(self.unmatched)}

    def text(self) -> str:
        lines = ["QUEUE            NOMINAL  USED  BORROWED  WEIGHT  FAIR SHARE (GPU-h)"]
        lines += [f"{q.name:<16} {q.nominal:>7g}  {q.used:>4g}  {q.borrowed:>8g}  {q.weight:>6g}  "
                  f"{'-' if q.share is None else f'{q.share / 3600:.1f}':>18}"
                  for q in self.queues]
        if self.models:
            lines += ["", "QUEUE            MODEL     NOMINAL  USED  BORROWED"]
            lines += [f"{m.queue:<16} {m.model:<8} {m.nominal:>8g}  {m.used:>4g}  "
                      f"{m.borrowed:>8g}" for m in self.models]
        lines += [f"GPU model {m}: no node has its labels" for m in self.unmatched]
        lines += ["", "WAITING (admission order)"]
        lines += [f"{g.gang}  queue {g.queue}, priority {g.priority}, {g.pods} pods, "
                  f"{g.gpus:g} GPUs: {g.why}; starts {g.start}" for g in self.waiting] \
            or ["(none)"]
        lines += ["", "BACKFILLED (onto room reserved for the first in the queue)"]
        lines += [f"{b.gang}  queue {b.queue}: expected to end {b.until}"
                  f"{', overran' if b.overran else ''}" for b in self.backfilled] or ["(none)"]
        lines += ["", "RECENT PREEMPTIONS"]
        lines += [f"{p.at}  {p.preemptor}: {p.message}" for p in self.preemptions] or ["(none)"]
        lines += ["", "CAPACITY REQUESTS"]
        lines += [f"{c.gang}  {c.mode}, {c.pods} pods, {c.gpus:g} GPUs: {c.state} for "
                  f"{c.age:.0f}s" for c in self.capacity] or ["(none)"]
        return "\n".join(lines) + "\n"


def _gang_name(unit: UnitId) -> str:
    """`ns/name` for a gang; a queued single pod says it is one."""
    return str(unit) if unit.kind == "pod" else unit.path


def report(policy: Policy, cluster: Tracked, events: Iterable[Mapping[str, Any]], now: float,
           memory: Mapping[str, str], placeholders: Iterable[Asking] = (),
           requests: Iterable[Asking] = ()) -> Report:
    """`cluster`: as listed once; `memory`: what the leader stored for the next one
    (`remembering`): the fair share; `placeholders` and (Provisioning)`requests`: the
    capacity requests open."""
    accelerators = cluster.accelerators
    quotas = quotas_of(policy, accelerators)
    used = holding(quotas, cluster.occupancy.namespace_gpus)
    rounds = Rounds()
    rounds.accounts.carry_on(policy, memory, now)
    fair = rounds.accounts.fair_share if FAIR_SHARE_KEY in memory else None
    queues = tuple(QueueLine(name, float(spec.nominal), float(used.get(name, 0)),
                             float(max(used.get(name, 0) - spec.nominal, 0)), spec.weight,
                             None if fair is None else fair.share(name, spec.weight))
                   for name, spec in sorted(quotas.specs.items()))
    # A dry run of a round, preemption included, in the order the controller would go:
    # what would be admitted now is about to go; everything else says why it waits.
    waiting: list[GangLine] = []
    reason: LineReason
    actions = rounds.preview(policy, cluster, now)
    predicted = rounds.predict()
    for action in actions:
        match action:
            case Wait():
                reason, why, members = action.reason, action.message, action.pods
            case Preempt():
                going = ", ".join(str(v.unit) for v in (*action.victims, *action.noticed))
                reason, why = "Preempting", (
                    f"would preempt {going} (after the policy's delay)" if not
                    action.noticed or action.notice_until is None else
                    f"preempting {going}: told to checkpoint by "
                    f"{rfc3339(action.notice_until)}, evicted then or once they answer")
                members = action.preemptor
            case Admit():
                reason, why, members = "Admissible", "about to be admitted", action.ungate
            case Finish() | Requeue() | Replan() | Ignore():
                continue
            case _:
                assert_never(action)
        # About to be admitted, or to preempt (its victims' termination aside): now.
        said = Prediction(now) if isinstance(action, Admit | Preempt) else \
            predicted.get(action.unit, UNKNOWN)
        waiting.append(GangLine(_gang_name(action.unit), quotas.queue_of(action.unit.namespace),
                                max(p.priority for p in members), len(members),
                                float(sum(accelerators.count(p.requests) for p in members)),
                                reason, why, None if said.at is None else rfc3339(said.at),
                                None if said.blocker is None else _gang_name(said.blocker)))
    return Report(queues, tuple(waiting), _preemptions(events),
                  (*_requests("placeholders", placeholders, waiting, now),
                   *_requests("provisioningRequest", requests, waiting, now)),
                  _backfilled(cluster, quotas, now), tuple(model_usage(policy, cluster)),
                  tuple(m.name for m in policy.gpu_models if not cluster.models.nodes.get(m.name)))


def _preemptions(events: Iterable[Mapping[str, Any]]) -> tuple[PreemptionLine, ...]:
    """The recent preemptions, newest first: one `Preempting` event per preemptor pod, so
    one line per preemption."""
    told: dict[str, PreemptionLine] = {}
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or "", reverse=True):
        involved = e.get("involvedObject") or {}
        if e.get("reason") == "Preempting" and e.get("message", "") not in told:
            told[e.get("message", "")] = PreemptionLine(
                e.get("lastTimestamp") or "",
                f"{involved.get('namespace', '')}/{involved.get('name', '')}",
                e.get("message", ""))
    return tuple(told.values())[:RECENT]


def _backfilled(cluster: Tracked, quotas: Quotas, now: float) -> tuple[BackfillLine, ...]:
    lines = []
    for key, until in sorted(cluster.backfilled.items()):
        pod = cluster.pods[key]
        unit = membership(pod) or UnitId.of_pod(key)
        lines.append(BackfillLine(_gang_name(unit), quotas.queue_of(key.namespace),
                                  rfc3339(until), now > until))
    return tuple(lines)


def _requests(mode: str, there: Iterable[Asking], waiting: Iterable[GangLine], now: float
              ) -> tuple[CapacityLine, ...]:
    by_unit: dict[UnitId, list[Asking]] = {}
    for one in there:
        by_unit.setdefault(one.unit, []).append(one)
    waits = {line.gang: line for line in waiting}
    lines = []
    for unit, held in sorted(by_unit.items()):
        gang = waits.get(_gang_name(unit))
        failed = next((a.failed for a in held if a.failed), None)
        lines.append(CapacityLine(
            _gang_name(unit), mode, gang.pods if gang else 0, gang.gpus if gang else 0.0,
            f"failed ({failed})" if failed else "open", now - min(a.created for a in held)))
    return tuple(lines)
