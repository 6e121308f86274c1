"""What happened to each job of a replay, from what a pod watch shows (pure: observations
in, actions and timelines out; the clock is passed in).

The recorder also plays two parts a real cluster's workloads play themselves:
- the job's own barrier: a distributed job computes only once all its workers run (they
  wait for each other at rendezvous), so its run time starts when the last pod is on a
  node (bound: when `airlock simulate` counts a job whole, too; KWOK has it Running
  moments later); an elastic job's (`minPods`) once that many are. Its end follows the
  simulation's pace (`webhook.simulation.pacing`): `runtime` at full size, slower in
  proportion with fewer pods, so each pod bound later brings it closer. The recorder says
  `Run` with the end when the job starts and each time it changes, and the replay gives
  every pod of the job KWOK's run-time annotation. A gang counts as half-placed only if
  one of its pods found no room while others held theirs (the scheduler's
  `Unschedulable`) before the job started; pods bound in one go count as placed
  together, even after the scheduler turned them all away (as coscheduling does until
  the whole group fits);
- the job's operator: a job that loses a pod before it finishes (preempted, evicted)
  starts again with new pods (`Restart`), as a JobSet or a training operator would; and
  a job done while some of its pods still wait (an elastic job's, above its minimum)
  deletes those (`Finish`).

It judges, for a job whose trace requires a topology, whether its pods bound together
kept it (`bench.peers.topologies`): the first attempt that broke it is told by
`broken_topologies`.

It counts Airlock's backfills as `airlock simulate` does: each admission whose placement
record, on its anchor pod, says `backfilledUntil`. And Airlock's predicted starts as
`airlock simulate --predictions` records them (`webhook.simulation.forecasts`): the first
time the controller's annotation `gpu-airlock.io/predicted-start` on a job's pod says,
and whether it said "unknown" before it said a time.

Times are seconds on the replay's clock, scaled back to the trace's (times the speed) in the
timelines, so figures compare with the trace and with `airlock simulate`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.peers.manifests import ATTEMPT_LABEL, JOB_LABEL, Attempt
from bench.peers.topologies import Levels, NodeLabels, broken
from webhook.keys import PLACEMENT_ANNOTATION, PREDICTED_START_ANNOTATION
from webhook.simulation.pacing import Pace
from webhook.simulation.timelines import Timeline
from webhook.simulation.traces import Job
from webhook.values import instant


@dataclass(frozen=True, slots=True)
class Run:
    """The attempt runs, with all its pods or (elastic) enough of them: its pods end at
    `ends` (on the replay's clock), which comes sooner as more of them join."""

    attempt: Attempt
    ends: float


@dataclass(frozen=True, slots=True)
class Restart:
    """The attempt lost a pod: delete what is left of it and create `new`."""

    old: Attempt
    new: Attempt


@dataclass(frozen=True, slots=True)
class Finish:
    """The attempt is done: delete its pods that still wait."""

    attempt: Attempt
    waiting: tuple[str, ...]


Action = Run | Restart | Finish

# How far apart, in real seconds, one scheduling pass binds a gang's pods on this loaded
# machine (coscheduling's bindings, once its Permit lets the group through, land some
# 50 ms apart): pods turned away before any of them had a node, then bound within this
# of each other, were placed together, not half-placed.
BURST = 1.0


@dataclass(slots=True)
class _Pod:
    gpus: int
    bound: float | None = None
    succeeded: float | None = None
    gone: float | None = None  # deleted, or failed, before it succeeded

    @property
    def released(self) -> float | None:
        return self.succeeded if self.succeeded is not None else self.gone


@dataclass(slots=True)
class _Job:
    job: Job
    attempt: int = 0
    pods: dict[str, _Pod] = field(default_factory=dict)
    whole_since: float | None = None
    pace: Pace | None = None  # while the current attempt runs
    done: bool = False  # its work is: it waits only for its pods to go
    whole: list[tuple[float, float]] = field(default_factory=list)
    completed: float | None = None
    preemptions: int = 0
    rejected: bool = False
    # Whether a pod of the current attempt found no room (the scheduler said so) while
    # a sibling held its node; and whether one found none before any sibling had one.
    blocked: bool = False
    refused: bool = False
    # Pods whose placement record says Airlock let them onto the room reserved for the head
    # (`backfilledUntil`): one record, on its anchor, for each admission.
    backfilled: set[str] = field(default_factory=set)
    # Its first predicted start (wall-clock seconds) and whether "unknown" came first.
    predicted: float | None = None
    unknown_first: bool = False
    # For a job with a required topology: each attempt's pods bound now (index -> node),
    # and what the first attempt to break it broke.
    placed: dict[str, dict[int, str]] = field(default_factory=dict)
    broken: str | None = None

    def current(self) -> Attempt:
        return Attempt(self.job, self.attempt)


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" and
               c.get("reason") == "Unschedulable" for c in conditions)


def _backfilled(meta: dict[str, Any]) -> bool:
    """Whether Airlock's placement record on the pod says it was backfilled (the replay
    reads it as a figure; the controller alone acts on records, once their seal opens)."""
    text = (meta.get("annotations") or {}).get(PLACEMENT_ANNOTATION)
    if not text or "backfilledUntil" not in text:
        return False
    try:
        record = json.loads(text)
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("backfilledUntil") is not None


def _predicted(record: _Job, meta: dict[str, Any]) -> None:
    """The job's first predicted start, from the controller's annotation (`predicting`:
    a time, or `unknown...`); a value it cannot read is no prediction."""
    text = (meta.get("annotations") or {}).get(PREDICTED_START_ANNOTATION)
    if not text or record.predicted is not None:
        return
    if text.startswith("unknown"):
        record.unknown_first = True
        return
    at = instant(PREDICTED_START_ANNOTATION, text)
    if isinstance(at, float):
        record.predicted = at


def never_runnable(job: Job, gpus_per_node: int, capacity: int) -> bool:
    """A job no node, or not the whole cluster, can hold (an elastic job: its minimum)."""
    return job.gpus > gpus_per_node or job.least * job.gpus > capacity


class Recorder:
    def __init__(self, jobs: Sequence[Job], gpus_per_node: int, capacity: int,
                 speed: float, nodes: NodeLabels | None = None, levels: Levels | None = None
                 ) -> None:
        """`nodes` (each node's labels) and `levels` (the policy's level -> node label)
        judge required topologies; without them none is judged broken."""
        self._speed = speed
        self._nodes, self._levels = nodes or {}, levels or {}
        # The wall-clock time at the replay's clock zero: a predicted start is a time.
        self.epoch = 0.0
        self._jobs = {(j.namespace, j.name): _Job(j) for j in jobs}
        self._never = {key for key, j in self._jobs.items()
                       if never_runnable(j.job, gpus_per_node, capacity)}

    def rejected(self, job: Job) -> None:
        """Admission turned the job's pods away: it will never run."""
        self._jobs[(job.namespace, job.name)].rejected = True

    def observe(self, now: float, pod: dict[str, Any], deleted: bool = False
                ) -> list[Action]:
        meta = pod["metadata"]
        labels = meta.get("labels") or {}
        record = self._jobs.get((meta["namespace"], labels.get(JOB_LABEL, "")))
        if record is None:
            return []  # not the bench's
        seen = record.pods.setdefault(meta["name"], _Pod(record.job.gpus))
        if meta["name"] not in record.backfilled and _backfilled(meta):
            record.backfilled.add(meta["name"])
        _predicted(record, meta)
        phase = (pod.get("status") or {}).get("phase")
        if seen.bound is None and (pod.get("spec") or {}).get("nodeName"):
            seen.bound = now
        if seen.bound is None and _unschedulable(pod) and \
                labels.get(ATTEMPT_LABEL) == str(record.attempt):
            if any(p.bound is not None for p in self._pods(record)):
                record.blocked = True
            else:
                record.refused = True
        lost = False
        if phase == "Succeeded" and seen.succeeded is None and seen.gone is None:
            seen.succeeded = now
        elif seen.gone is None and seen.succeeded is None and \
                (deleted or phase == "Failed" or meta.get("deletionTimestamp")):
            seen.gone, lost = now, True
        self._judge(record, labels.get(ATTEMPT_LABEL, "0"), meta["name"], seen,
                    (pod.get("spec") or {}).get("nodeName"))
        if labels.get(ATTEMPT_LABEL) != str(record.attempt) or record.completed is not None:
            return []  # an attempt given up: only its pods' release times still count
        if lost and not record.done:
            return [self._restart(record, now)]
        return self._progress(record, now)

    def _judge(self, record: _Job, attempt: str, name: str, seen: _Pod, node: str | None
               ) -> None:
        job = record.job
        if record.broken is not None or not self._nodes or \
                (job.required_topology is None and job.slice_topology is None):
            return
        placed = record.placed.setdefault(attempt, {})
        index = int(name.rsplit("-", 1)[1])
        if seen.released is not None:
            placed.pop(index, None)
        elif node and index not in placed:
            placed[index] = node
            if (what := broken(job, placed, self._nodes, self._levels)) is not None:
                record.broken = f"attempt {attempt}: {what}"

    def _pods(self, record: _Job) -> list[_Pod]:
        """The current attempt's pods seen so far."""
        return [record.pods[n] for n in record.current().pod_names if n in record.pods]

    def _progress(self, record: _Job, now: float) -> list[Action]:
        attempt, job = record.current(), record.job
        pods = [record.pods.get(n) for n in attempt.pod_names]
        bound = [p for p in pods if p is not None and p.bound is not None]
        if record.whole_since is None:
            if len(bound) < job.least:
                return []
            record.whole_since = now
            earliest = min(p.bound for p in bound if p.bound is not None)
            if not record.blocked and not (record.refused and now - earliest > BURST):
                # Bound in one go: the milliseconds between one binding and the next,
                # times the speed, are the replay's resolution, not a half-placed gang.
                for pod in bound:
                    pod.bound = now
            record.pace = Pace.start(job.runtime / self._speed, now, len(bound), job.pods)
            return [Run(attempt, record.pace.ends)]
        actions: list[Action] = []
        if not record.done and any(p and p.succeeded is not None for p in pods):
            # Its pods end together (KWOK's annotation): the first one done, the job is.
            record.done = True
            waiting = tuple(name for name, p in zip(attempt.pod_names, pods, strict=True)
                            if p is None or p.bound is None)
            actions = [Finish(attempt, waiting)] if waiting else []
        if record.done:
            if all(p and p.released is not None for p in pods):
                record.whole.append((record.whole_since, now))
                record.whole_since, record.completed = None, now
        elif record.pace is not None and len(bound) > record.pace.bound:
            record.pace = record.pace.rebound(now, len(bound))
            actions = [Run(attempt, record.pace.ends)]
        return actions

    def _restart(self, record: _Job, now: float) -> Restart:
        if record.whole_since is not None:
            record.whole.append((record.whole_since, now))
            record.whole_since, record.pace = None, None
        old = record.current()
        record.attempt, record.blocked, record.refused = record.attempt + 1, False, False
        record.preemptions += 1
        return Restart(old, record.current())

    # --- the run's state --------------------------------------------------------------
    def settled(self) -> bool:
        """Every job completed, or never able to run."""
        return all(r.completed is not None or r.rejected or key in self._never
                   for key, r in self._jobs.items())

    def broken_topologies(self) -> dict[str, str]:
        """Each job some attempt of which broke its required topology: what it broke."""
        return {f"{ns}/{name}": r.broken for (ns, name), r in self._jobs.items()
                if r.broken is not None}

    def running(self) -> int:
        """Jobs running whole now."""
        return sum(1 for r in self._jobs.values() if r.whole_since is not None)

    def timelines(self, end: float) -> list[Timeline]:
        """Each job's timeline in trace seconds; pods still held at `end` count as held
        until then."""
        out, speed = [], self._speed
        for key, r in self._jobs.items():
            j = r.job

            def scaled(periods: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
                return [(a * speed, b * speed) for a, b in periods]

            holds = [(p.bound * speed, (p.released if p.released is not None else end) * speed,
                      p.gpus) for p in r.pods.values() if p.bound is not None]
            whole = scaled(r.whole)
            predicted = None if r.predicted is None else (r.predicted - self.epoch) * speed
            if r.whole_since is not None:
                whole += scaled([(r.whole_since, end)])
            out.append(Timeline(
                name=j.name, namespace=j.namespace, cls=j.cls, pods=j.pods, gpus=j.gpus,
                submit=j.submit, holds=holds, whole=whole,
                completed=None if r.completed is None else r.completed * speed,
                preemptions=r.preemptions, never_runnable=r.rejected or key in self._never,
                backfilled=len(r.backfilled), predicted=predicted,
                unknown_first=r.unknown_first))
        return out
