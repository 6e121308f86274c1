"""A discrete-event replay of a trace on a simulated cluster, with a virtual clock.

Events are jobs submitted and jobs finished; after the events of each instant:
1. the kube-scheduler model binds pending pods that carry no gate, by priority then
   arrival, preempting lower-priority pods where the class may (`clusters`);
2. `airlock` only, and only when something changed since the last time (gated pods came,
   or capacity was freed): the controller's own `decide()` runs over the gated pods and
   the nodes with room; the pods it admits lose their gate, pinned to the node it
   planned for each (`--pin nodes`) or only to the domain it chose (`--pin domain`),
   and the scheduler binds them.

A job runs once every pod of it is bound, for `runtime` seconds, then its pods finish and
free their GPUs. An elastic job (`minPods`) runs once that many are bound; its work is
`runtime` x `pods` pod-seconds, done at the pace of the pods bound, so pods that join
later bring its end closer. A job that loses a pod while it runs (preempted) starts again with new
pods, from nothing; a pod of a job that is not whole yet is simply pending again.

`stock` is the world without Airlock: the same priorities (PriorityClasses the cluster
has anyway), no gate, no topology, so a gang's pods are bound one by one as room comes
and hold their GPUs until the last one is.

The run ends when no event is left: jobs that can never be placed wait, they are not
retried in a loop.
"""

from __future__ import annotations

import dataclasses
import heapq
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import assert_never

from webhook.controller.core.actions import (
    Admit,
    Finish,
    Ignore,
    Preempt,
    Replan,
    Requeue,
    Wait,
)
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import DecideOptions
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.rounds import Rounds
from webhook.policy.model import Policy
from webhook.pools import HOST_LABEL
from webhook.simulation.clusters import Cluster, Pin, PodKey, Resident, Selector, Shape
from webhook.simulation.forecasts import Forecasts
from webhook.simulation.marking import Marked, Marker, Rejected, never_runnable
from webhook.simulation.pacing import Pace
from webhook.simulation.runs import Run, Scheduler, Stats
from webhook.simulation.timelines import Timeline
from webhook.simulation.traces import Job

# A wake-up: a round at a time the controller named (a preemption notice's deadline).
_FINISH, _SUBMIT, _WAKE = 0, 1, 2
# Passes of the scheduler in one instant: each pass after the first follows evictions.
_MAX_PASSES = 8
_DEFAULTS = DecideOptions()


@dataclass(slots=True)
class _Job:
    marked: Marked
    timeline: Timeline
    pods: list[_Pod] = field(default_factory=list)
    attempt: int = 0
    bound: int = 0
    whole_since: float | None = None
    # While it runs: its work left and pods bound, so when it ends (a finish event for
    # another time is stale: the pace changed since).
    pace: Pace | None = None


@dataclass(slots=True)
class _Pod:
    info: PodInfo
    job: _Job
    seq: int
    node: int | None = None
    bound: float = 0.0
    pin: Pin | None = None
    # Nodes its affinity keeps it off (the room Airlock reserved for others).
    off: frozenset[int] = frozenset()
    # The label sets a node must carry one of: the job's nodeSelector (with each GPU
    # model admission keeps it to), and the labels of the model Airlock admitted it on.
    selectors: tuple[Selector, ...] = ((),)
    # Of a job that ended while this pod still waited (an elastic job's pod above its
    # minimum): the scheduler drops it when it comes to it.
    gone: bool = False


# Pods the scheduler places alike, in one FIFO: (priority, GPUs, may preempt, pin, off,
# the label sets a node must carry one of).
_Kind = tuple[int, int, bool, Pin | None, frozenset[int], tuple[Selector, ...]]


class Simulation:
    def __init__(self, jobs: Sequence[Job], policy: Policy, shape: Shape,
                 scheduler: Scheduler, options: DecideOptions = _DEFAULTS,
                 predictions: bool = False) -> None:
        self.shape, self.scheduler, self.options = shape, scheduler, options
        self.forecasts = Forecasts() if predictions else None
        self.policy = policy
        # The controller's rounds, with the queues' memory between them (fair share,
        # evictions) as the leader keeps it; no PodDisruptionBudgets in a simulated cluster.
        self.rounds = Rounds(options)
        self.rounds.accounts.list_pdbs([])
        self.accelerators = policy.counted()
        self.cluster = Cluster(shape, policy.topology_levels.values(), policy.accelerators[0],
                               [0, *(c.priority_class.value for c in policy.classes.values())])
        # The cluster as the controller's watches would report it: the pods Airlock
        # gates, and every pod running.
        self.tracked = Tracked.of(self.cluster.node_views(), (), self.accelerators)
        self.stats = Stats()
        self.timelines: list[Timeline] = []
        self.events: list[tuple[float, int, int, _Job, int]] = []
        self.pending: dict[_Kind, deque[_Pod]] = {}
        self.gated: dict[PodKey, _Pod] = {}
        self.changed = False
        self._seq = 0
        self._bound: dict[PodKey, _Pod] = {}
        # Pods of gangs that succeeded since the last round, which it sees once.
        self._finished: list[PodInfo] = []
        # Told of every pod bound, as a watch on pods would be: (its job, the job's
        # attempt, the pod's name, the node's), so a run's placements can be checked.
        self.on_bind: Callable[[Job, int, str, str], None] | None = None
        mark = Marker(policy)
        for job in jobs:
            timeline = Timeline(job.name, job.namespace, job.cls, job.pods, job.gpus,
                                job.submit)
            self.timelines.append(timeline)
            marked = mark(job)
            if isinstance(marked, Rejected):
                timeline.never_runnable = True
                continue
            timeline.never_runnable = never_runnable(job, marked, self.cluster,
                                                     scheduler == "airlock")
            self._push(job.submit, _SUBMIT, _Job(marked, timeline), 0)

    def _next(self) -> int:
        self._seq += 1
        return self._seq

    def _push(self, at: float, kind: int, job: _Job, attempt: int) -> None:
        heapq.heappush(self.events, (at, kind, self._next(), job, attempt))

    # --- pods arriving, binding, leaving ------------------------------------------

    def _create(self, job: _Job, now: float) -> None:
        selectors = job.marked.selectors
        job.pods = [_Pod(info, job, self._next(), selectors=selectors)
                    for info in job.marked.pods(job.attempt, now)]
        for pod in job.pods:
            if self.scheduler == "airlock" and pod.info.gated:
                self.gated[pod.info.key] = pod
                self.tracked.put_pod(pod.info)
                self.changed = True
            else:
                self._enqueue(pod)

    def _enqueue(self, pod: _Pod) -> None:
        preempts = pod.job.marked.preempts
        kind = (pod.info.priority, pod.job.timeline.gpus, preempts, pod.pin, pod.off,
                pod.selectors)
        self.pending.setdefault(kind, deque()).append(pod)

    def _bind(self, pod: _Pod, node: int, now: float) -> None:
        job = pod.job
        self.cluster.bind(node, pod.info.key, Resident(pod.info.priority, job.timeline.gpus,
                                                       now))
        pod.node, pod.bound = node, now
        # The pod as the controller sees it while it runs: bound, started.
        self.tracked.put_pod(dataclasses.replace(pod.info, node_name=self.cluster.names[node],
                                                 gated=False, started=now))
        self._bound[pod.info.key] = pod
        job.bound += 1
        trace = job.marked.job
        if self.on_bind is not None:
            self.on_bind(trace, job.attempt, pod.info.name, self.cluster.names[node])
        if job.pace is not None:
            self._paced(job, job.pace.rebound(now, job.bound))
        elif job.bound >= trace.least:
            job.whole_since = now
            self._paced(job, Pace.start(trace.runtime, now, job.bound, len(job.pods)))

    def _paced(self, job: _Job, pace: Pace) -> None:
        job.pace = pace
        self._push(pace.ends, _FINISH, job, job.attempt)

    def _release(self, pod: _Pod, now: float) -> None:
        assert pod.node is not None
        self.cluster.release(pod.node, pod.info.key)
        self.tracked.drop_pod(pod.info.key)
        del self._bound[pod.info.key]
        pod.job.timeline.holds.append((pod.bound, now, pod.job.timeline.gpus))
        pod.node = None
        pod.job.bound -= 1
        self.changed = True

    def _stop(self, job: _Job, now: float) -> None:
        """Every pod of a job that ran leaves (done, or preempted): those bound free
        their room, and those still waiting (an elastic job's) are gone with it."""
        assert job.whole_since is not None
        for pod in job.pods:
            if pod.node is not None:
                self._release(pod, now)
            elif self.gated.pop(pod.info.key, None) is not None:
                self.tracked.drop_pod(pod.info.key)
                self.changed = True
            else:
                pod.gone = True
        job.timeline.whole.append((job.whole_since, now))
        job.whole_since, job.pace = None, None

    def _succeed(self, job: _Job, now: float) -> None:
        """The job is done: its pods leave, and the controller sees them succeeded until
        its next round, as a watch shows finished pods, so it learns run times."""
        ran = [pod for pod in job.pods if pod.node is not None]
        self._stop(job, now)
        job.timeline.completed = now
        if self.scheduler == "airlock":
            for pod in ran:
                self.tracked.put_pod(dataclasses.replace(pod.info, gated=False, terminal=True,
                                                         succeeded=True))
                self._finished.append(pod.info)

    def _evict(self, keys: Sequence[PodKey], now: float) -> None:
        pods_by_job: dict[int, list[_Pod]] = {}
        for key in keys:
            pod = self._bound[key]
            pods_by_job.setdefault(id(pod.job), []).append(pod)
        for pods in pods_by_job.values():
            job = pods[0].job
            job.timeline.preemptions += 1
            if job.whole_since is not None:
                self._stop(job, now)
                job.attempt += 1
                self._create(job, now)
                continue
            for pod in pods:
                self._release(pod, now)
                pod.seq = self._next()
                self._enqueue(pod)

    # --- the scheduler and the controller ----------------------------------------

    def _pass(self, now: float) -> bool:
        """One pass of the scheduler over the pending pods; True if it evicted any."""
        evicted = False
        heads = [(-kind[0], q[0].seq, kind) for kind, q in self.pending.items() if q]
        heapq.heapify(heads)
        while heads:
            _, _, kind = heapq.heappop(heads)
            priority, gpus, preempts, pin, off, selectors = kind
            queue = self.pending[kind]
            while queue and queue[0].gone:
                queue.popleft()
            if not queue:
                continue
            node = self.cluster.pick_any(gpus, pin, off, selectors)
            if node is None and preempts:
                found = self.cluster.victims_any(gpus, priority, pin, off, selectors)
                if found is not None:
                    node, keys = found
                    self._evict(keys, now)
                    evicted = True
            if node is None:
                continue  # the rest of this kind do not fit either
            pod = queue.popleft()
            self._bind(pod, node, now)
            if queue:
                heapq.heappush(heads, (-priority, queue[0].seq, kind))
        return evicted

    def _schedule(self, now: float) -> None:
        for _ in range(_MAX_PASSES):
            if not self._pass(now):
                return

    def _decide(self, now: float) -> bool:
        """One round of the controller; True if it preempted."""
        preempted = False
        self.changed = False
        started = time.perf_counter()
        self.rounds.accounts.sample(self.policy, self.tracked, now)
        for info in self._finished:
            self.tracked.drop_pod(info.key)
        self._finished.clear()
        actions = self.rounds.run(self.policy, self.tracked, now)
        if self.forecasts is not None:  # before the cluster changes
            self.forecasts.seen(self.rounds, actions, now,
                                lambda p: self.gated[p.key].job.timeline)
        self.stats.decide_calls += 1
        self.stats.decide_seconds += time.perf_counter() - started
        for action in actions:
            match action:
                case Admit() | Finish():
                    self._let_go(action, now)
                case Preempt():
                    # The record on the preemptor's anchor keeps the room held for it;
                    # then the victims go, whole gangs, and it is admitted next round.
                    anchor = self.gated[action.anchor.key]
                    kept = dataclasses.replace(anchor.info.recorded, preemption=action.record)
                    anchor.info = dataclasses.replace(anchor.info, recorded=kept)
                    self.tracked.put_pod(anchor.info)
                    self._evict([p.key for v in action.victims for p in v.pods
                                 if p.key in self._bound], now)
                    # Simulated victims never answer a notice: they go at its deadline.
                    if action.notice_until is not None:
                        self._push(action.notice_until, _WAKE, anchor.job, 0)
                    preempted = preempted or bool(action.victims)
                case Requeue():
                    self._evict([p.key for p in action.pods if p.key in self._bound], now)
                case Wait() | Ignore() | Replan():
                    pass  # a pod let go is tracked again only once bound: none is replanned
                case _:
                    assert_never(action)
        return preempted

    def _let_go(self, action: Admit | Finish, now: float) -> None:
        """The pods an admission lets go, ungated as the applier patches them: pinned to
        the planned node (or slice, or domain), off the nodes kept for others, and kept
        to the model's labels; the scheduler binds them in the order they are let go."""
        record = action.record
        if isinstance(action, Admit) and record.backfilled_until is not None:
            self.gated[action.anchor.key].job.timeline.backfilled += 1
        pin = (record.topology_key, record.domain) \
            if record.topology_key and record.domain else None
        off = frozenset(self.cluster.index[n] for n in record.fenced_off)
        for info in sorted(action.ungate, key=lambda p: p.name):
            pod = self.gated.pop(info.key)
            # Let go: the watch would show it again once it is bound, the record on its
            # anchor.
            self.tracked.drop_pod(info.key)
            if isinstance(action, Admit) and info.key == action.anchor.key:
                kept = dataclasses.replace(pod.info.recorded, placement=record)
                pod.info = dataclasses.replace(pod.info, recorded=kept)
            # A slice's domain lies inside the gang's, and a node inside both: pinning
            # the narrowest is enough.
            planned, sliced = record.node_of(info.name), record.slice_of(info.name)
            pod.pin = (HOST_LABEL, planned) if planned is not None else \
                (record.slice_key, sliced) if record.slice_key and sliced else pin
            pod.off = off
            if record.model_labels:
                pod.selectors = tuple(tuple(sorted({**dict(s), **dict(record.model_labels)}
                                                   .items())) for s in pod.selectors)
            node = self.cluster.pick_any(pod.job.timeline.gpus, pod.pin, off, pod.selectors)
            if node is None:
                self._enqueue(pod)
            else:
                self._bind(pod, node, now)

    # --- the clock ------------------------------------------------------------------

    def run(self, label: str) -> Run:
        now = 0.0
        while self.events:
            now = self.events[0][0]
            while self.events and self.events[0][0] == now:
                _, kind, _, job, attempt = heapq.heappop(self.events)
                self.stats.events += 1
                if kind == _SUBMIT:
                    self._create(job, now)
                elif kind == _WAKE:
                    self.changed = True
                elif job.attempt == attempt and job.pace is not None and \
                        job.pace.ends == now:
                    self._succeed(job, now)
            self._schedule(now)
            # A round that evicted (preempted) frees room: the next round, at once,
            # admits the preemptor into it.
            for _ in range(_MAX_PASSES):
                if not (self.changed and self.gated):
                    break
                # After a preemption the controller's next round comes before the
                # scheduler binds anything into the room it freed.
                if self._decide(now) and self.gated:
                    self._decide(now)
                self._schedule(now)
        # Pods still bound belong to gangs that never became whole: they held their
        # GPUs to the end.
        for pod in self._bound.values():
            pod.job.timeline.holds.append((pod.bound, now, pod.job.timeline.gpus))
        return Run(label, self.scheduler, self.shape, self.timelines, now, self.stats,
                   self.forecasts is not None)


def simulate(jobs: Sequence[Job], policy: Policy, shape: Shape, scheduler: Scheduler,
             options: DecideOptions = _DEFAULTS, label: str | None = None,
             predictions: bool = False) -> Run:
    return Simulation(jobs, policy, shape, scheduler, options, predictions).run(
        label or scheduler)
