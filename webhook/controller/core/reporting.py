"""What `airlock status` shows, from a listing of the cluster and the policy: the queues
(nominal, used, borrowed, share of use now), the waiting gangs in admission order with
why each waits (the controller's own decision core, run as a dry run), and the recent
preemptions (the controller's `Preempting` events). Pure; `statusing` lists and prints.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, assert_never

from webhook.controller.core.actions import Admit, Finish, Ignore, Preempt, Requeue, Wait
from webhook.controller.core.configuring import fair_share_of, preemption_of, quotas_of
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.gangs import GangId, kind, named, readable
from webhook.controller.core.objects import NodeInfo, PodInfo
from webhook.controller.core.quotas import holding
from webhook.controller.core.tracking import Tracked
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


@dataclass(frozen=True, slots=True)
class GangLine:
    gang: str
    queue: str
    priority: int
    pods: int
    gpus: float
    why: str


@dataclass(frozen=True, slots=True)
class PreemptionLine:
    at: str
    preemptor: str
    message: str


@dataclass(frozen=True, slots=True)
class Report:
    queues: tuple[QueueLine, ...]
    waiting: tuple[GangLine, ...]
    preemptions: tuple[PreemptionLine, ...]

    def as_json(self) -> dict[str, Any]:
        return {"queues": [dataclasses.asdict(q) for q in self.queues],
                "waiting": [dataclasses.asdict(g) for g in self.waiting],
                "preemptions": [dataclasses.asdict(p) for p in self.preemptions]}

    def text(self) -> str:
        lines = ["QUEUE            NOMINAL  USED  BORROWED  WEIGHT  FAIR SHARE (GPU-h)"]
        lines += [f"{q.name:<16} {q.nominal:>7g}  {q.used:>4g}  {q.borrowed:>8g}  {q.weight:>6g}  "
                  f"{'-' if q.share is None else f'{q.share / 3600:.1f}':>18}"
                  for q in self.queues]
        lines += ["", "WAITING (admission order)"]
        lines += [f"{g.gang}  queue {g.queue}, priority {g.priority}, {g.pods} pods, "
                  f"{g.gpus:g} GPUs: {g.why}" for g in self.waiting] or ["(none)"]
        lines += ["", "RECENT PREEMPTIONS"]
        lines += [f"{p.at}  {p.preemptor}: {p.message}" for p in self.preemptions] or ["(none)"]
        return "\n".join(lines) + "\n"


def _gang_name(gang: GangId) -> str:
    """`ns/name` for a gang; a queued single pod says it is one."""
    return named(gang) if kind(gang) == "pod" else readable(gang)


def report(policy: Policy, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
           events: Iterable[Mapping[str, Any]], now: float, kept: str | None = None
           ) -> Report:
    """`kept`: the fair-share usage the leader keeps (`remembering`), when readable."""
    cluster = Tracked.of(nodes, pods, policy.counted())
    accelerators = cluster.accelerators
    quotas = quotas_of(policy, accelerators)
    used = holding(quotas, cluster.namespace_gpus)
    fair = None if kept is None else fair_share_of(policy, None, now).carried_on(kept)
    queues = tuple(QueueLine(name, float(spec.nominal), float(used.get(name, 0)),
                             float(max(used.get(name, 0) - spec.nominal, 0)), spec.weight,
                             None if fair is None else fair.share(name, spec.weight))
                   for name, spec in sorted(quotas.specs.items()))
    # A dry run of a round, preemption included, in the order the controller would go:
    # what would be admitted now is about to go; everything else says why it waits.
    state = QueueState(quotas, dataclasses.replace(preemption_of(policy), delay=0.0),
                       spared=policy.excluded_namespaces)
    waiting: list[GangLine] = []
    for action in decide(cluster, {}, now, state=state):
        match action:
            case Wait():
                why, members = action.message, action.pods
            case Preempt():
                why = (f"would preempt {', '.join(v.what for v in action.victims)} "
                       f"(after the policy's delay)")
                members = action.preemptor
            case Admit():
                why, members = "about to be admitted", action.ungate
            case Finish() | Requeue() | Ignore():
                continue
            case _:
                assert_never(action)
        waiting.append(GangLine(_gang_name(action.gang), quotas.queue_of(action.gang[0]),
                                max(p.priority for p in members), len(members),
                                float(sum(accelerators.count(p.requests) for p in members)),
                                why))
    # One `Preempting` event per preemptor pod: one line per preemption.
    told: dict[str, PreemptionLine] = {}
    for e in sorted(events, key=lambda e: e.get("lastTimestamp") or "", reverse=True):
        involved = e.get("involvedObject") or {}
        if e.get("reason") == "Preempting" and e.get("message", "") not in told:
            told[e.get("message", "")] = PreemptionLine(
                e.get("lastTimestamp") or "",
                f"{involved.get('namespace', '')}/{involved.get('name', '')}",
                e.get("message", ""))
    return Report(queues, tuple(waiting), tuple(told.values())[:RECENT])
