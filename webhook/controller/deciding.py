"""One round of decisions: the cluster snapshot and the gangs in, actions out. Pure, with
the clock passed in, so every rule here is tested without a cluster.

Order of work in a round:
1. capacity promised earlier is held: pods let go but not yet bound (until the
   reservation times out), and gangs whose decision is recorded but not finished (a
   controller that died half-way); the latter are finished first, in their recorded domain;
2. waiting gangs, by priority then arrival: each whole gang fits, or it waits. In
   `strict` order the first gang that does not fit stops the queue; in `backfill` order
   smaller gangs behind it may go, but never onto the domain kept for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from webhook.controller.fitting import NoFit, Plan, fit, place_in, reserve
from webhook.controller.objects import NodeInfo, PodInfo
from webhook.controller.snapshot import Snapshot, gpus

GangId = tuple[str, str]
Order = Literal["strict", "backfill"]


@dataclass(frozen=True, slots=True)
class Options:
    order: Order = "backfill"
    reservation_timeout: float = 120.0
    incomplete_warning_after: float = 300.0


@dataclass(frozen=True, slots=True)
class Record:
    """The durable decision, kept as JSON in an annotation on the gang's anchor pod."""

    domain: str | None
    topology_key: str | None
    members: tuple[str, ...]
    at: float

    def dumps(self) -> str:
        return json.dumps({"domain": self.domain, "topologyKey": self.topology_key,
                           "members": list(self.members), "at": self.at}, sort_keys=True)

    @classmethod
    def loads(cls, text: str) -> Record | None:
        try:
            raw = json.loads(text)
            return cls(raw.get("domain"), raw.get("topologyKey"), tuple(raw["members"]),
                       float(raw["at"]))
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


@dataclass(frozen=True, slots=True)
class Admit:
    gang: GangId
    record: Record
    anchor: PodInfo
    ungate: tuple[PodInfo, ...]


@dataclass(frozen=True, slots=True)
class Finish:
    gang: GangId
    record: Record
    ungate: tuple[PodInfo, ...]


@dataclass(frozen=True, slots=True)
class Wait:
    gang: GangId
    pods: tuple[PodInfo, ...]
    message: str
    warning: bool = False


Action = Admit | Finish | Wait


@dataclass
class Gang:
    id: GangId
    members: list[PodInfo] = field(default_factory=list)

    @property
    def gated(self) -> list[PodInfo]:
        return [p for p in self.members if p.gated]

    @property
    def priority(self) -> int:
        return max(p.priority for p in self.members)

    @property
    def arrival(self) -> float:
        return min(p.created for p in self.members)

    def size(self, looked_up: Mapping[GangId, int | str]) -> int | str | None:
        stated = {p.expected_size for p in self.members if p.expected_size is not None}
        if len(stated) > 1:
            # A size that changed half-way (pods of two revisions): no guess, the gang
            # waits until its pods agree.
            return (f"members state different sizes ({', '.join(map(str, sorted(stated)))}); "
                    f"waiting until they agree")
        if stated:
            return stated.pop()
        return looked_up.get(self.id)

    def record(self) -> Record | None:
        for p in self.members:
            if p.placement:
                return Record.loads(p.placement)
        return None


def gangs_of(pods: Iterable[PodInfo]) -> dict[GangId, Gang]:
    gangs: dict[GangId, Gang] = {}
    for p in pods:
        if p.gang_id and p.active:
            gangs.setdefault(p.gang_id, Gang(p.gang_id)).members.append(p)
    for g in gangs.values():
        g.members.sort(key=lambda p: (p.created, p.name))
    return gangs


def _hold_promised(gangs: dict[GangId, Gang], snap: Snapshot, now: float,
                   options: Options) -> list[Action]:
    actions: list[Action] = []
    for gang in gangs.values():
        record = gang.record()
        if record is None:
            continue
        if now - record.at < options.reservation_timeout:
            unbound = [p for p in gang.members if not p.gated and not p.node_name]
            if unbound:
                held = place_in(unbound, snap, _domain_nodes(snap, unbound[0], record))
                if held:
                    reserve(held, unbound, snap)
        if gang.gated and any(p.name in record.members for p in gang.gated):
            ungate = tuple(p for p in gang.gated if p.name in record.members)
            held = place_in(ungate, snap, _domain_nodes(snap, ungate[0], record))
            if held:
                reserve(held, list(ungate), snap)
            actions.append(Finish(gang.id, record, ungate))
    return actions


def _domain_nodes(snap: Snapshot, pod: PodInfo, record: Record) -> list[str]:
    if record.domain is None or record.topology_key is None:
        return snap.eligible_nodes(pod)
    return snap.domains(pod, record.topology_key).get(record.domain, [])


def _outlook(gang: Gang, size: int, snap: Snapshot) -> str:
    """What the whole gang will need, judged from the members present, and the best room
    there is now: so a person knows early whether waiting for the rest will be enough."""
    anchor = gang.members[0]
    if not anchor.topology_key:
        return ""
    need = round(sum(gpus(p.requests) for p in gang.members) * size / len(gang.members))
    domains = snap.domains(anchor, anchor.topology_key)
    best = max((snap.free_gpus(nodes) for nodes in domains.values()), default=0)
    return f"; needs {need} GPUs in one {anchor.topology_key} domain, the best has {best} free"


def _pending(gang: Gang, looked_up: Mapping[GangId, int | str], now: float,
             options: Options, snap: Snapshot) -> tuple[list[PodInfo] | None, Wait | None]:
    """The members to admit if the gang is complete, or why it waits."""
    size = gang.size(looked_up)
    present = len(gang.members)
    if isinstance(size, str):
        return None, Wait(gang.id, tuple(gang.gated), f"SizeUnknown: {size}", warning=True)
    if size is None:
        return None, None  # the size lookup is under way
    if present < size:
        late = now - gang.arrival > options.incomplete_warning_after
        return None, Wait(gang.id, tuple(gang.gated),
                          f"{'Incomplete' if late else 'Waiting'}: {present}/{size} pods "
                          f"present{_outlook(gang, size, snap)}", warning=late)
    if present > size:
        # The first `size` by creation make the gang; later ones stay gated and say why.
        return gang.members[:size], Wait(
            gang.id, tuple(p for p in gang.members[size:] if p.gated),
            f"Oversize: {present} pods for a gang of {size}; this pod is not part of it",
            warning=True)
    return gang.members, None


def decide(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
           looked_up: Mapping[GangId, int | str], now: float,
           options: Options = Options()) -> list[Action]:
    all_pods = list(pods)
    snap = Snapshot(nodes, all_pods)
    gangs = gangs_of(all_pods)
    actions = _hold_promised(gangs, snap, now, options)
    finishing = {a.gang for a in actions}
    queue = sorted((g for g in gangs.values() if g.gated and g.id not in finishing
                    and g.record() is None),
                   key=lambda g: (-g.priority, g.arrival, g.id))
    kept: set[str] = set()
    blocked_by: GangId | None = None
    for gang in queue:
        members, note = _pending(gang, looked_up, now, options, snap)
        if note:
            actions.append(note)
        if members is None:
            continue
        gated = [p for p in members if p.gated]
        if not gated:
            continue
        if blocked_by is not None and options.order == "strict":
            actions.append(Wait(gang.id, tuple(gated), f"Waiting: behind gang "
                                f"{blocked_by[0]}/{blocked_by[1]}, first in the queue"))
            continue
        anchor = gated[0]
        outcome = fit(members, snap, anchor.topology_key, anchor.topology_mode,
                      level=anchor.topology_key or "topology", avoid=kept)
        if isinstance(outcome, NoFit):
            actions.append(Wait(gang.id, tuple(gated),
                                f"Waiting: {len(gang.members)}/{len(members)} pods present; "
                                f"{outcome.reason}"))
            if blocked_by is None:
                blocked_by = gang.id
                kept.update(outcome.best_domain_nodes)
            continue
        reserve(outcome, members, snap)
        actions.append(_admit(gang, gated, outcome, anchor, now))
    return actions


def _admit(gang: Gang, gated: list[PodInfo], plan: Plan, anchor: PodInfo,
           now: float) -> Admit:
    members = tuple(sorted(p.name for p in gated))
    record = Record(plan.domain, anchor.topology_key if plan.domain else None, members, now)
    first = min(gated, key=lambda p: p.name)
    return Admit(gang.id, record, first, tuple(gated))


def describe(action: Action) -> str:
    """The event text for an action."""
    if isinstance(action, Wait):
        return action.message
    where = f"domain {action.record.domain}" if action.record.domain else "any domain"
    need = sum(gpus(p.requests) for p in action.ungate)
    verb = "Admitted" if isinstance(action, Admit) else "Resumed"
    return f"{verb}: {where}; {len(action.ungate)} pods, {need} GPUs"
