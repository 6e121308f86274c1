"""One round of decisions: the cluster snapshot and the gangs in, actions out. Pure, with
the clock passed in, so every rule here is tested without a cluster.

Order of work in a round:
1. capacity promised earlier is held: pods let go but not yet bound (until the
   reservation times out), and members named in a recorded decision but still gated (a
   controller that died half-way): those are finished first, in their recorded domain;
2. gangs with waiting members, in queue order (`ordering`): a new gang goes whole or
   not at all; a gang that already runs takes in replacements and late joiners, in its
   own domain, once all of them are there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, assert_never

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.fitting import NoFit, Plan, fit, place_in, reserve
from webhook.controller.gangs import Gang, GangId, Record, SizeAnswer, gangs_of
from webhook.controller.objects import NodeInfo, PodInfo
from webhook.controller.ordering import Order, Queue, queue_order
from webhook.controller.snapshot import Snapshot
from webhook.conventions.base import SizeUnknown
from webhook.policy.model import DEFAULT_ACCELERATORS

__all__ = ["Action", "Admit", "DecideOptions", "Event", "EventReason", "EventType", "Finish",
           "Record", "Wait", "WaitReason", "decide", "describe", "events_of"]

# Why a gang waits: the reason of its event, and the word its message starts with.
WaitReason = Literal["Waiting", "Incomplete", "Oversize", "SizeUnknown"]
EventReason = Literal["Admitted", "Resumed", WaitReason]
EventType = Literal["Normal", "Warning"]

# What a policy that names no accelerator counts.
POLICY_DEFAULT = Accelerators.of(DEFAULT_ACCELERATORS)


@dataclass(frozen=True, slots=True)
class DecideOptions:
    order: Order = "backfill"
    reservation_timeout: float = 120.0
    incomplete_warning_after: float = 300.0


@dataclass(frozen=True, slots=True)
class Admit:
    """Record the decision on `anchor` (with the anchor's own ungate, in one patch), then
    ungate the rest of `ungate`."""

    gang: GangId
    record: Record
    anchor: PodInfo
    ungate: tuple[PodInfo, ...]
    gpus: GpuEquivalents
    note: str = ""


@dataclass(frozen=True, slots=True)
class Finish:
    """Ungate members an earlier, recorded decision named (the record already exists)."""

    gang: GangId
    record: Record
    ungate: tuple[PodInfo, ...]
    gpus: GpuEquivalents


@dataclass(frozen=True, slots=True)
class Wait:
    gang: GangId
    pods: tuple[PodInfo, ...]
    reason: WaitReason
    detail: str
    warning: bool = False

    @property
    def message(self) -> str:
        return f"{self.reason}: {self.detail}"


Action = Admit | Finish | Wait


@dataclass(frozen=True, slots=True)
class Event:
    """What to tell about an action: one event on each of `pods`."""

    pods: tuple[PodInfo, ...]
    type: EventType
    reason: EventReason
    message: str


def _hold(pods: Sequence[PodInfo], record: Record, snap: Snapshot) -> None:
    if not pods:
        return
    candidates = _domain_nodes(snap, pods[0], record.topology_key, record.domain)
    held = place_in(pods, snap, candidates)
    if held:
        reserve(held, pods, snap)


def _hold_promised(gang: Gang, snap: Snapshot, now: float, options: DecideOptions) -> Finish | None:
    for record in gang.records:
        if now - record.at < options.reservation_timeout:
            _hold([p for p in gang.let_go if not p.node_name and p.name in record.members],
                  record, snap)
    promised = gang.promised
    if not promised:
        return None
    record = next(r for r in gang.records if promised[0].name in r.members)
    _hold(promised, record, snap)
    return Finish(gang.id, record, tuple(promised), snap.need(promised))


def _domain_nodes(snap: Snapshot, pod: PodInfo, key: str | None,
                  domain: str | None) -> list[str]:
    if domain is None or key is None:
        return snap.eligible_nodes(pod)
    return snap.domains(pod, key).get(domain, [])


def _outlook(gang: Gang, size: int, snap: Snapshot) -> str:
    """What the whole gang will need, judged from the members present, and the best room
    there is now: so a person knows early whether waiting for the rest will be enough."""
    anchor = gang.members[0]
    if not anchor.topology_key:
        return ""
    need = round(snap.need(gang.members) * size / len(gang.members))
    domains = snap.domains(anchor, anchor.topology_key)
    best = max((snap.free_gpus(nodes) for nodes in domains.values()), default=0)
    return f"; needs {need} GPUs in one {anchor.topology_key} domain, the best has {best} free"


def _size(gang: Gang, looked_up: Mapping[GangId, SizeAnswer]) -> int | Wait | None:
    size = gang.size(looked_up)
    if isinstance(size, SizeUnknown):
        return Wait(gang.id, tuple(gang.waiting), "SizeUnknown", size.reason, warning=True)
    return size  # None: the owner lookup is under way


def _oversize(gang: Gang, extras: Sequence[PodInfo], message: str) -> list[Wait]:
    return [Wait(gang.id, tuple(extras), "Oversize", f"{message}; this pod is not part of it",
                 warning=True)] if extras else []


def _whole(gang: Gang, size: int, now: float, options: DecideOptions, snap: Snapshot
           ) -> tuple[list[PodInfo] | None, list[Wait]]:
    """A new gang: all of it, once every member exists. Beyond its size, the first by
    creation make the gang and later ones stay gated, saying why."""
    present = len(gang.members)
    if present < size:
        late = now - gang.arrival > options.incomplete_warning_after
        return None, [Wait(gang.id, tuple(gang.members), "Incomplete" if late else "Waiting",
                           f"{present}/{size} pods present{_outlook(gang, size, snap)}",
                           warning=late)]
    return gang.members[:size], _oversize(gang, gang.members[size:],
                                          f"{present} pods for a gang of {size}")


def _joiners(gang: Gang, size: int, now: float, options: DecideOptions
             ) -> tuple[list[PodInfo] | None, list[Wait]]:
    """A gang that already runs: waiting pods replace members that are gone, or join
    after the size grew; they go together once enough are there to make the gang whole."""
    placed = len(gang.let_go) + len(gang.promised)
    room, waiting = size - placed, gang.waiting
    if room <= 0:
        return None, _oversize(gang, waiting, f"the gang of {size} already has {placed} "
                                              f"members admitted")
    if len(waiting) < room:
        late = now - min(p.created for p in waiting) > options.incomplete_warning_after
        return None, [Wait(gang.id, tuple(waiting), "Incomplete" if late else "Waiting",
                           f"{len(waiting)}/{room} pods present to rejoin a gang of {size} "
                           f"running with {placed}", warning=late)]
    return waiting[:room], _oversize(gang, waiting[room:], f"{placed + len(waiting)} pods "
                                                           f"for a gang of {size}")


def _fit_joiners(gang: Gang, pods: list[PodInfo], snap: Snapshot, avoid: set[str]
                 ) -> tuple[Plan | NoFit, str | None]:
    """Joiners go where the gang runs; the domain they must use, and the outcome."""
    key, domain = gang.home()
    anchor = pods[0]
    if key is None or domain is None:
        return fit(pods, snap, anchor.topology_key, anchor.topology_mode,
                   level=anchor.topology_key or "topology", avoid=avoid), None
    nodes = [n for n in _domain_nodes(snap, anchor, key, domain) if n not in avoid]
    placed = place_in(pods, snap, nodes)
    if placed is not None:
        return Plan(domain, placed.assignments), key
    need = snap.need(pods)
    return NoFit(f"needs {need} GPUs in {key} domain {domain}, where the gang runs; it has "
                 f"{snap.free_gpus(nodes)} free", tuple(nodes)), key


def _consider(gang: Gang, snap: Snapshot, looked_up: Mapping[GangId, SizeAnswer],
              now: float, options: DecideOptions, queue: Queue) -> list[Action]:
    size = _size(gang, looked_up)
    if size is None or isinstance(size, Wait):
        return [size] if size else []
    started = gang.started
    members, out = (_joiners(gang, size, now, options) if started
                    else _whole(gang, size, now, options, snap))
    actions: list[Action] = list(out)
    if members is None:
        return actions
    if (why := queue.behind()) is not None:
        return [*actions, Wait(gang.id, tuple(members), "Waiting", why)]
    anchor = members[0]
    key: str | None = anchor.topology_key
    if started:
        outcome, home_key = _fit_joiners(gang, members, snap, queue.kept)
        key = home_key or key
    else:
        outcome = fit(members, snap, key, anchor.topology_mode, level=key or "topology",
                      avoid=queue.kept)
    if isinstance(outcome, NoFit):
        present = f"{len(members)}/{size} pods present" if not started else \
            f"{len(members)} pods to rejoin a gang of {size}"
        queue.did_not_fit(gang, outcome)
        return [*actions, Wait(gang.id, tuple(members), "Waiting",
                               f"{present}; {outcome.reason}")]
    reserve(outcome, members, snap)
    record = Record(outcome.domain, key if outcome.domain else None,
                    tuple(sorted(p.name for p in members)), now, size)
    return [*actions, Admit(gang.id, record, min(members, key=lambda p: p.name),
                            tuple(members), snap.need(members),
                            _joining_note(gang, size) if started else "")]


def _joining_note(gang: Gang, size: int) -> str:
    running = len(gang.let_go) + len(gang.promised)
    note = f"; joining {running} members already admitted"
    first = gang.records[0].size if gang.records else None
    if first is not None and first != size:
        note += f"; the gang's size changed from {first} to {size}"
    return note


def decide(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
           looked_up: Mapping[GangId, SizeAnswer], now: float,
           options: DecideOptions = DecideOptions(),
           accelerators: Accelerators = POLICY_DEFAULT) -> list[Action]:
    """`accelerators`: what the policy counts as GPUs."""
    all_pods = list(pods)
    snap = Snapshot(nodes, all_pods, accelerators)
    gangs = gangs_of(all_pods)
    actions: list[Action] = []
    for gang in gangs.values():
        finish = _hold_promised(gang, snap, now, options)
        if finish is not None:
            actions.append(finish)
    queue = Queue(options.order)
    for gang in queue_order(g for g in gangs.values() if g.waiting):
        actions.extend(_consider(gang, snap, looked_up, now, options, queue))
    return actions


def _lifted(verb: str, action: Admit | Finish, note: str = "") -> str:
    record = action.record
    where = f"domain {record.domain}" if record.domain else "any domain"
    return f"{verb}: {where}; {len(action.ungate)} pods, {action.gpus} GPUs{note}"


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
        case _:
            assert_never(action)


def describe(action: Action) -> str:
    """The event text for an action (its first event's, where it has several)."""
    return events_of(action)[0].message
