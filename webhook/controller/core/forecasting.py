"""When each waiting unit is expected to start: the round played forward over the expected
ends of what runs.

A round ends with units waiting. The forecast takes a fork of its snapshot and its
queues' usage, and steps through time: at each next expected end (of a pod that runs, a
unit the round admitted, or one the forecast itself started), what ends gives its room
and its queue's usage back, and the waiting units go through the same stages as in a
round (`stages`), in queue order, at that time: the order, quotas and borrowing, the
head's reservation, backfill and preemption are the round's own rules (a unit that
preempts starts then; its victims' ends are gone with them). A unit admitted at a step is
predicted to start then, and is expected to end its run time later (`runtimes`: stated,
or `activeDeadlineSeconds`, times the share of it runs of its namespace and class took;
else learned per namespace and class, or per namespace before its class has runs enough,
counting the units of the kind still running as runs at least as long as they ran so
far). The head's shadow time, which backfill asks, counts the expected ends of what the
forecast itself started as it counts those of the pods that ran.

Honest about what it cannot know: a unit that still waits once every known end has
passed, while something of unknown end (no run time stated, none learned) holds room it
could use, is predicted "unknown", blocked by the unit of unknown end that holds most
GPUs on the nodes it may use. A unit still waiting when the steps run out, or with
nothing left to end, is unknown with no blocker.

Where it is wrong (docs/predictions.md): run times are estimates (a stated one is
taken as stated until 5 runs of its kind taught how long they run); units that are not
here yet, capacity requests and GPU-model quotas are not played forward; what has no
known end never frees room (unless preempted); a step lets preemption try only where as
much is free as a unit of its window needs. Pure, the clock passed in.
"""

from __future__ import annotations

import copy
import dataclasses
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.actions import Action, Admit, Preempt, Victim, Wait
from webhook.controller.core.cluster.capacity import with_pod_slot
from webhook.controller.core.gangs import Gang, membership
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.placement.backfill import Placed
from webhook.controller.core.placement.runtimes import Key, Runtimes, key_of
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.planning import release
from webhook.controller.core.queues.queueing import Queueing
from webhook.controller.core.reasons import WaitReason
from webhook.controller.core.resources import Resources
from webhook.controller.core.round import Round
from webhook.controller.core.stages import consider

# Steps played forward at most: each is a pass of waiting units through the stages.
STEPS: Final = 96
# Units a step leaves waiting before it stops, first in the order first: those further
# back rarely go before them (a backfill would), and a pass over thousands costs a round.
WINDOW: Final = 200
# A step takes the ends within this share of their distance from now of the first (and
# at least the controller's `--forecast-resolution`, 15 s): thousands of pods ending over
# hours are tens of steps, and a start so predicted is late by at most that share of its
# wait.
SPREAD: Final = 0.1
# Preemptions planned per forecast at most: a plan on thousands of nodes costs up to a
# few hundred ms, its rankings built again each step (up to a round's plans at every
# step tripled a forecast's cost at 5,000 waiting gangs on 5,000 nodes).
PLANS: Final = 8
# Waits no end of another unit changes: the unit itself (or the cluster) must change.
UNPREDICTABLE: Final[frozenset[WaitReason]] = frozenset(
    {"Incomplete", "SizeUnknown", "Oversize", "Invalid", "Growing", "AwaitingVictims",
     "NeverFits"})


@dataclass(frozen=True, slots=True)
class Prediction:
    """When a unit is expected to start (seconds since the epoch), or None when that
    cannot be known; then `blocker`, when one unit's unknown end is why."""

    at: float | None
    blocker: UnitId | None = None


UNKNOWN: Final = Prediction(None)


@dataclass(slots=True)
class _End:
    """What is expected to end at `at`: room on nodes (each pod's node, and its GPUs),
    and usage of a queue."""

    at: float
    pods: list[tuple[str, PodInfo, GpuEquivalents]]
    queue: str


class _Ends:
    """The expected ends still to come, soonest first, and what holds room for a time
    nobody knows (unit -> node -> GPUs)."""

    def __init__(self) -> None:
        # (when, sequence, what): tuples compare in C, a dataclass's order in Python
        # (tens of thousands of ends are pushed and popped per forecast).
        self.heap: list[tuple[float, int, _End]] = []
        self.unknown: dict[UnitId, dict[str, GpuEquivalents]] = {}
        self.gone: set[PodKey] = set()
        # What the forecast started, per node: the head's shadow time counts its ends as
        # it counts those of the pods that ran (`Backfill.placed`).
        self.placed: dict[str, list[Placed]] = {}
        # Their uids: preemption chooses no victim among them (the candidates skip them).
        self.gone_uids: set[str] = set()
        self._seq = 0

    def add(self, at: float | None, unit: UnitId, pods: Sequence[tuple[str, PodInfo]],
            queue: str, each: Mapping[PodKey, GpuEquivalents]) -> None:
        if at is None:
            held = self.unknown.setdefault(unit, {})
            for node, pod in pods:
                held[node] = held.get(node, 0) + each.get(pod.key, 0)
            return
        self._seq += 1
        placed = [(node, pod, each.get(pod.key, 0)) for node, pod in pods]
        heapq.heappush(self.heap, (at, self._seq, _End(at, placed, queue)))

    def step_at(self, at: float) -> None:
        """A step at `at` where nothing ends: the waiting units are tried again."""
        self._seq += 1
        heapq.heappush(self.heap, (at, self._seq, _End(at, [], "")))

    def evicted(self, victims: Iterable[Victim]) -> None:
        """Pods a forecast's preemption evicts: gone now, and their ends with them."""
        for victim in victims:
            self.unknown.pop(victim.unit, None)
            for pod in victim.pods:
                self.gone.add(pod.key)
                self.gone_uids.add(pod.uid)

    def next(self, now: float, resolution: float) -> list[_End]:
        """The ends of the next step: the soonest, and those close after it."""
        first = heapq.heappop(self.heap)[2]
        found = [first]
        last = first.at + max(resolution, (first.at - now) * SPREAD)
        while self.heap and self.heap[0][0] <= last:
            found.append(heapq.heappop(self.heap)[2])
        return found


def forecast(r: Round, actions: Iterable[Action], steps: int = STEPS
             ) -> dict[UnitId, Prediction]:
    """The predicted start of every unit that waits after round `r`, which decided
    `actions`; `r` is left as it was."""
    cluster = r.snap.cluster
    waits = [a for a in actions if isinstance(a, Wait) and a.reason not in UNPREDICTABLE]
    # In the order the round went: the forecast keeps it (fair share moves it little).
    pending = [g for a in waits if (g := cluster.membership.gang(a.unit)) is not None
               and not g.started]
    found: dict[UnitId, Prediction] = {w.unit: UNKNOWN for w in waits}
    if not pending:
        return found
    # What pods marked for deletion, or evicted by the round, hold frees in a grace
    # period, not played forward: a step now tries the units in it.
    gone = r.snap.once_gone()
    snap = gone or r.snap.fork()
    ends = _Ends()
    # Preemption as the round has it; what the forecast ends or evicts is no victim
    # after (the candidates skip it as they skip pods deleted).
    ends.gone_uids.update(r.queues.state.deleted)
    held = _held(r)
    state = r.queues.state
    runtimes = state.runtimes.running(_going(held, r.now, state.spared))
    queues = Queueing(dataclasses.replace(state, deleted=ends.gone_uids, runtimes=runtimes),
                      snap, r.now)
    queues.ledger.used = dict(r.queues.ledger.used)
    queues.charges = dict(r.queues.charges)
    queues.models = copy.deepcopy(r.queues.models)
    _running(r, queues, ends, held)
    freed = gone is not None
    for action in actions:
        if isinstance(action, Admit) and action.unit in r.plans:
            _started(ends, queues, r.plans[action.unit].assignments, action.ungate,
                     action.unit, r.now, queues.state.runtimes)
        elif isinstance(action, Preempt) and action.unit in r.queues.preempting:
            _preempted(ends, queues, action, r.queues.preempting[action.unit], r.now)
            freed = True
    if freed:
        ends.step_at(r.now)
    now, plans = r.now, PLANS
    for _ in range(steps):
        if not pending or not ends.heap:
            break
        step = ends.next(r.now, r.options.forecast_resolution)
        now = max(now, step[-1].at)
        _ended(step, queues, ends)
        given = queues.afresh(plans)
        pending = _step(r, queues, ends, pending, now, found)
        plans -= given - queues.plans_left()
    return found | _blocked(r, ends, pending)


def _ended(step: Sequence[_End], queues: Queueing, ends: _Ends) -> None:
    """What ends in `step` gives its room and its queue's usage back: one `take` per
    node (each keeps the domains' rooms and the free indexes in step)."""
    freed: dict[str, Resources] = {}
    for end in step:
        for node, pod, gpus in end.pods:
            if pod.key in ends.gone:  # evicted by a preemption of the forecast
                continue
            room = freed.setdefault(node, {})
            for k, v in with_pod_slot(pod.requests).items():
                room[k] = room.get(k, 0) - v
            ends.gone.add(pod.key)
            ends.gone_uids.add(pod.uid)
            queues.ledger.add(end.queue, -gpus)
    for node, room in freed.items():
        queues.snap.take(node, room)


def _held(r: Round) -> list[tuple[str, PodInfo, UnitId]]:
    """Every pod that holds GPUs: its node, and its unit."""
    cluster = r.snap.cluster
    return [(node, pod, membership(pod) or UnitId.of_pod(pod.key))
            for node, holders in cluster.occupancy.holders.items()
            for pod in (cluster.pods[h.pod] for h in holders)]


def _going(held: Sequence[tuple[str, PodInfo, UnitId]], now: float,
           spared: frozenset[str]) -> dict[Key, tuple[float, ...]]:
    """How long each unit that holds GPUs and states no run time has run (since its
    first pod started), per namespace and class: runs known to last at least that."""
    first: dict[UnitId, PodInfo] = {}
    stating: set[UnitId] = set()
    for _, pod, unit in held:
        if pod.marks.runtime is not None:
            stating.add(unit)
        elif pod.started and (unit not in first or pod.started < (first[unit].started or 0)):
            first[unit] = pod
    going: dict[Key, list[float]] = {}
    for unit, pod in first.items():
        if unit not in stating and pod.namespace not in spared:
            going.setdefault(key_of(pod), []).append(now - (pod.started or now))
    return {key: tuple(times) for key, times in going.items()}


def _running(r: Round, queues: Queueing, ends: _Ends,
             held: Sequence[tuple[str, PodInfo, UnitId]]) -> None:
    """The expected end of every pod that holds GPUs, one end per unit and time."""
    cluster = r.snap.cluster
    runtimes, spared = queues.state.runtimes, queues.state.spared
    gpus_of, quotas = cluster.occupancy.gpus_of, queues.state.quotas
    by_end: dict[tuple[float | None, UnitId], list[tuple[str, PodInfo]]] = {}
    for node, pod, unit in held:
        ran = r.now - pod.started if pod.started else 0.0
        runtime = None if pod.namespace in spared else runtimes.typical((pod,), ran)
        # Not started, it starts now at the soonest. Started, it ends after now: `typical`
        # expects longer than it ran so far (as long again when nothing learned does).
        at = None if runtime is None else (pod.started or r.now) + runtime
        by_end.setdefault((at, unit), []).append((node, pod))
    for (at, unit), pods in by_end.items():
        ends.add(at, unit, pods, quotas.queue_of(unit.namespace), gpus_of)


def _started(ends: _Ends, queues: Queueing, assignments: Mapping[PodKey, str],
             pods: Sequence[PodInfo], unit: UnitId, at: float, runtimes: Runtimes) -> None:
    """A unit admitted at `at` onto `assignments`: when it is expected to end."""
    runtime = runtimes.typical(pods)
    each = {p.key: queues.snap.gpus(p.requests) for p in pods}
    placed = [(assignments[p.key], p) for p in pods if p.key in assignments]
    end = None if runtime is None else at + runtime
    ends.add(end, unit, placed, queues.state.quotas.queue_of(unit.namespace), each)
    for node, pod in placed:
        ends.placed.setdefault(node, []).append((end, pod.key, each[pod.key]))


def _preempted(ends: _Ends, queues: Queueing, preempt: Preempt, where: Mapping[PodKey, str],
               at: float) -> None:
    """A preemption at `at`: the preemptor starts once its victims are gone, and a grace
    period, seconds, is not played forward. Their room on its nodes is its own already
    (`commit`); elsewhere it is given back now, and their ends go with them."""
    ends.evicted(preempt.victims)
    mine = set(where.values())
    for victim in preempt.victims:
        release(queues.snap, victim, queues.gpus_of,
                only={p.node_name for p in victim.pods if p.node_name} - mine)
    _started(ends, queues, where, preempt.preemptor, preempt.unit, at,
             queues.state.runtimes)


def _step(r: Round, queues: Queueing, ends: _Ends, pending: list[Gang], now: float,
          found: dict[UnitId, Prediction]) -> list[Gang]:
    """The waiting units at `now`, in queue order, through the round's stages: those
    admitted are predicted to start now; the others wait on."""
    queues.now = now
    step = Round(queues.snap, queues, r.sizes, now, r.options)
    step.holds_of(r)
    if (backfill := step.reservation.backfill) is not None:
        backfill.gone, backfill.placed = ends.gone, ends.placed
    still: list[Gang] = []
    # Nothing goes while less is free than the least any unit of the window needs.
    need = queues.snap.unit_need
    if _free(queues) < min(need(g, g.waiting) for g in pending[:WINDOW]):
        return pending
    for seen, gang in enumerate(pending):
        if len(still) >= WINDOW:
            return still + pending[seen:]
        try:
            said = consider(step, gang)
        except Exception:  # as the round's own error boundary: it stays unknown
            continue
        preempt = next((a for a in said if isinstance(a, Preempt)), None)
        if preempt is not None and gang.id in queues.preempting:
            found[gang.id] = Prediction(now)
            _preempted(ends, queues, preempt, queues.preempting[gang.id], now)
            continue
        admit = next((a for a in said if isinstance(a, Admit)), None)
        if admit is None or gang.id not in step.plans:
            still.append(gang)
            continue
        found[gang.id] = Prediction(now)
        _started(ends, queues, step.plans[gang.id].assignments, admit.ungate, gang.id, now,
                 queues.state.runtimes)
    return still


def _free(queues: Queueing) -> GpuEquivalents:
    return sum(max(f, 0) for f in queues.snap.free_gpu.values())


def _blocked(r: Round, ends: _Ends, pending: Sequence[Gang]) -> dict[UnitId, Prediction]:
    """The units still waiting: unknown, each blocked by the unit of unknown end that
    holds most GPUs on the nodes it may use (none when nothing of unknown end does)."""
    if not ends.unknown or ends.heap:
        # Steps ran out while ends were still to come: beyond the forecast.
        return {}
    on_node: dict[str, list[tuple[UnitId, GpuEquivalents]]] = {}
    for unit, held in ends.unknown.items():
        for node, gpus in held.items():
            on_node.setdefault(node, []).append((unit, gpus))
    by_kind: dict[object, UnitId | None] = {}
    found = {}
    for gang in pending:
        anchor = gang.waiting[0] if gang.waiting else gang.members[0]
        sig = anchor.constraints.signature
        if sig not in by_kind:
            held_by: dict[UnitId, GpuEquivalents] = {}
            for node in r.snap.eligible_set(anchor):
                for unit, gpus in on_node.get(node, ()):
                    held_by[unit] = held_by.get(unit, 0) + gpus
            by_kind[sig] = min(held_by, key=lambda u: (-held_by[u], str(u))) \
                if held_by else None
        found[gang.id] = Prediction(None, by_kind[sig])
    return found
