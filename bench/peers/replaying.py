"""One system's replay of a trace on a fresh sandbox: the control plane with its fake GPU
nodes, the system itself (Airlock's webhook and controller, or a peer built from its Go
module) with its own timers divided by the speed, then the jobs submitted at their times
(divided by the speed too) as the objects a user writes, and a pod watch recording what
happened to them.

A run ends when every job completed (or can never run), when nothing moved for `stall`
seconds with every job submitted and none running (a deadlock, or gangs that can never
be placed), or after `timeout` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from bench.common import trace_grants
from bench.peers.journal import Journal
from bench.peers.manifests import (
    JOB_LABEL,
    KUEUE_API,
    Attempt,
    System,
    kueue_queues,
    pod_group,
    pods,
)
from bench.peers.models import MODELS_FILE, kueue_flavors
from bench.peers.peers import PEERS, at_speed
from bench.peers.recording import Action, Finish, Recorder, Restart, Run
from bench.peers.systems import apply_objects, keep_logs, make_cluster, start_airlock
from bench.peers.timers import controller_flags, policies_at_speed
from bench.peers.topologies import node_labels
from webhook.kuberaw import json_of
from webhook.policy.model import Policy
from webhook.sandbox.binaries import ensure_binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import Shape
from webhook.sandbox.operating import RunningCommand, start_operators, stop
from webhook.sandbox.processes import AirlockProcess
from webhook.sandbox.stages import DELAY
from webhook.simulation.timelines import Timeline
from webhook.simulation.traces import Job

Progress = Callable[[str], None]
PROBE = "bench-probe"


@dataclass(frozen=True, slots=True)
class Options:
    shape: Shape
    speed: float
    policies: Path
    stall: float = 30.0
    timeout: float = 1800.0
    # Where each system's component logs are kept (LOGS/<system>/), for a look after.
    logs: Path | None = None
    # On a mixed cluster (`shape.pools`): the policy file of its models and a queue per
    # team (`bench.peers.models`), added to Airlock's policies; the merged policy holds it.
    models_file: Path | None = None


@dataclass(frozen=True, slots=True)
class Outcome:
    system: System
    timelines: list[Timeline]
    end: float  # trace seconds from the first submit slot to the end of the run
    setup_seconds: float  # wall-clock seconds to bring the sandbox and the system up
    ended: str  # "settled", "stalled" or "timeout"
    broken: dict[str, str]  # Recorder.broken_topologies


def replay(system: System, jobs: Sequence[Job], policy: Policy, options: Options,
           progress: Progress) -> Outcome:
    """Raises what the system's build or start raised: the caller reports it by name."""
    started = time.monotonic()
    binaries = ensure_binaries(progress)
    peer = PEERS.get(system)
    plane = ControlPlane(binaries).start()
    operators: list[RunningCommand] = []
    airlock: list[AirlockProcess] = []
    try:
        namespaces = sorted({j.namespace for j in jobs})
        asyncio.run(make_cluster(plane, policy, namespaces, options.shape, system))
        if system == "airlock":
            policies = policies_at_speed(options.policies, plane.workdir / "policies",
                                         policy, options.speed)
            (policies / "95-trace-grants.yaml").write_text(trace_grants(jobs))
            if options.models_file is not None:
                shutil.copyfile(options.models_file, policies / MODELS_FILE)
            airlock = start_airlock(plane, policies, controller_flags(options.speed))
        if peer is not None:
            operators = start_operators([at_speed(peer, options.speed)], plane.workdir,
                                        plane.admin_kubeconfig, plane.pki.ca, progress)
        if system == "kueue":
            queues = kueue_flavors(policy, options.shape.pools) if options.shape.pools \
                else kueue_queues(namespaces, options.shape)
            asyncio.run(apply_objects(plane.admin_kubeconfig, queues))
        setup = time.monotonic() - started
        progress(f"{system}: sandbox up in {setup:.0f}s; replaying {len(jobs)} jobs at "
                 f"{options.speed:g}x")
        pools = options.shape.node_pools()
        recorder = Recorder(jobs, max(p.gpus_per_node for p in pools),
                            sum(p.count * p.gpus_per_node for p in pools), options.speed,
                            node_labels(options.shape), policy.topology_levels)
        with (plane.workdir / "pods.log").open("wb") as journal:
            end, ended = asyncio.run(_Replay(system, jobs, policy, recorder, options,
                                             plane.admin_kubeconfig, progress, journal).run())
        return Outcome(system, recorder.timelines(end), end * options.speed, setup, ended,
                       recorder.broken_topologies())
    finally:
        stop(operators)
        for process in airlock:
            process.process.terminate()
            with contextlib.suppress(Exception):
                process.process.wait(timeout=10)
        plane.stop()
        if options.logs is not None:
            keep_logs(plane.workdir, options.logs / system)
        plane.remove()


class _Replay:
    def __init__(self, system: System, jobs: Sequence[Job], policy: Policy,
                 recorder: Recorder, options: Options, kubeconfig: Path,
                 progress: Progress, journal: BinaryIO) -> None:
        self.system, self.jobs, self.policy = system, jobs, policy
        self.recorder, self.options, self.kubeconfig = recorder, options, kubeconfig
        self.progress = progress
        self.journal, self.journaling = journal, Journal()
        self.tasks: set[asyncio.Task[None]] = set()
        self.t0 = 0.0
        self.epoch = 0.0  # the wall-clock time at t0, by which KWOK reads an end
        self.last_event = 0.0
        # One patch at a time per attempt, in the order the recorder asked: an elastic
        # job's later end must not be overwritten by an earlier one still in flight.
        self.patching: dict[str, asyncio.Lock] = {}

    def now(self) -> float:
        return time.monotonic() - self.t0

    def spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def run(self) -> tuple[float, str]:
        async with await from_kubeconfig(self.kubeconfig) as api:
            self.core = client.CoreV1Api(api)
            self.custom = client.CustomObjectsApi(api)
            await self.probe()
            listed = await (await self.core.list_pod_for_all_namespaces(
                label_selector=JOB_LABEL, _preload_content=False)).json()
            self.t0, self.epoch = time.monotonic(), time.time()
            self.recorder.epoch = self.epoch
            watcher = asyncio.create_task(self.watch(listed["metadata"]["resourceVersion"]))
            submitter = asyncio.create_task(self.submit())
            try:
                ended = await self.until_done(watcher, submitter)
            finally:
                end = self.now()
                for task in (watcher, submitter, *self.tasks):
                    task.cancel()
                await asyncio.gather(watcher, submitter, *self.tasks, return_exceptions=True)
        return end, ended

    async def probe(self, within: float = 180.0) -> None:
        """A small gang through the whole path (admission, the system's own queueing or
        gating, the scheduler, KWOK) before the clock starts: a controller or scheduler
        still syncing would otherwise count as the first jobs' wait."""
        probe = Attempt(Job(name=PROBE, submit=0.0, namespace=self.jobs[0].namespace,
                            cls="training", pods=2, gpus=1, runtime=1.0), 0)
        await self.create(probe)
        await self.until_probe(probe, lambda phases: phases.count("Running") == 2, within)
        for name in probe.pod_names:
            await json_of(await self.core.delete_namespaced_pod(
                name, probe.job.namespace, grace_period_seconds=0, _preload_content=False))
        await self.until_probe(probe, lambda phases: not phases, within)
        await self.forget(probe)

    async def until_probe(self, probe: Attempt, done: Callable[[list[str | None]], bool],
                          within: float) -> None:
        deadline = time.monotonic() + within
        while True:
            listed = await json_of(await self.core.list_namespaced_pod(
                probe.job.namespace, label_selector=f"{JOB_LABEL}={PROBE}",
                _preload_content=False))
            phases = [(p.get("status") or {}).get("phase") for p in listed["items"]]
            if done(phases):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.system}: the probe gang did not run and go "
                                   f"within {within:g}s (phases {phases})")
            await asyncio.sleep(0.2)

    async def until_done(self, watcher: asyncio.Task[None],
                         submitter: asyncio.Task[None]) -> str:
        while True:
            await asyncio.sleep(0.2)
            if watcher.done():
                watcher.result()  # its error, if it failed
                raise RuntimeError("the pod watch ended")
            submitted = submitter.done()
            if submitted and self.recorder.settled():
                return "settled"
            if submitted and self.recorder.running() == 0 and \
                    self.now() - self.last_event > self.options.stall:
                self.progress(f"{self.system}: nothing moved for {self.options.stall:g}s "
                              "with no job running: stopping (jobs left are stuck)")
                return "stalled"
            if self.now() > self.options.timeout:
                self.progress(f"{self.system}: timed out after {self.options.timeout:g}s")
                return "timeout"

    async def submit(self) -> None:
        for job in self.jobs:
            await asyncio.sleep(max(0.0, job.submit / self.options.speed - self.now()))
            self.spawn(self.create(Attempt(job, 0)))
        self.last_event = self.now()

    async def create(self, attempt: Attempt) -> None:
        job = attempt.job
        group = pod_group(attempt) if self.system == "coscheduling" else None
        try:
            if group is not None:
                await self.custom.create_namespaced_custom_object(
                    "scheduling.x-k8s.io", "v1alpha1", job.namespace, "podgroups", group)
            # All at once, as an operator making a gang's pods does.
            await asyncio.gather(*(self.create_pod(pod) for pod in
                                   pods(self.system, attempt, self.policy,
                                        self.options.speed)))
        except ApiException as e:
            if e.status is not None and 400 <= e.status < 500:
                why = e.body if isinstance(e.body, str) else e.reason
                self.progress(f"{self.system}: {job.namespace}/{job.name} refused at "
                              f"admission ({e.status}): {why}")
                self.recorder.rejected(job)
                return
            raise

    async def create_pod(self, pod: dict[str, Any]) -> None:
        await json_of(await self.core.create_namespaced_pod(
            pod["metadata"]["namespace"], body=pod, _preload_content=False))

    async def watch(self, version: str) -> None:
        while True:
            response = await self.core.list_pod_for_all_namespaces(
                watch=True, resource_version=version, label_selector=JOB_LABEL,
                timeout_seconds=300, allow_watch_bookmarks=True, _preload_content=False)
            async with response:
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = orjson.loads(line)
                    kind, obj = event["type"], event["object"]
                    if kind == "ERROR":
                        raise RuntimeError(f"pod watch: {obj.get('message')}")
                    version = obj["metadata"]["resourceVersion"]
                    if kind == "BOOKMARK":
                        continue
                    self.last_event = self.now()
                    if line := self.journaling.line(self.last_event * self.options.speed,
                                                    self.epoch + self.last_event, obj,
                                                    kind == "DELETED"):
                        self.journal.write(line)
                    for action in self.recorder.observe(self.last_event, obj,
                                                        deleted=kind == "DELETED"):
                        self.spawn(self.act(action))

    async def act(self, action: Action) -> None:
        try:
            await self._act(action)
        except ApiException as e:
            # A pod gone meanwhile (preempted as its run began): the watch says so too.
            if e.status != 404:
                self.progress(f"{self.system}: {type(action).__name__} of "
                              f"{action_name(action)} failed: {e.status} {e.reason}")

    async def _act(self, action: Action) -> None:
        if isinstance(action, Run):
            await self.run_until(action)
        elif isinstance(action, Finish):
            await self.delete(action.attempt.job.namespace, action.waiting)
        elif isinstance(action, Restart):
            await self.restart(action)

    async def run_until(self, action: Run) -> None:
        """Every pod of the attempt, bound or still waiting, ends at the job's end: KWOK
        reads a time (not a duration, which it would count afresh from any later change
        to the pod) and completes a pod bound after it at once."""
        job = action.attempt.job
        ends = datetime.fromtimestamp(self.epoch + action.ends, UTC).isoformat()
        body = {"metadata": {"annotations": {DELAY: ends}}}

        async def annotate(name: str) -> None:
            try:
                await json_of(await self.core.patch_namespaced_pod(
                    name, job.namespace, body=body,
                    _content_type="application/merge-patch+json", _preload_content=False))
            except ApiException as e:
                if e.status != 404:  # a waiting pod the job's end deleted meanwhile
                    raise

        async with self.patching.setdefault(f"{job.namespace}/{action.attempt.group}",
                                        asyncio.Lock()):
            await asyncio.gather(*(annotate(n) for n in action.attempt.pod_names))

    async def delete(self, namespace: str, names: Sequence[str]) -> None:
        for name in names:
            with contextlib.suppress(ApiException):
                await json_of(await self.core.delete_namespaced_pod(
                    name, namespace, grace_period_seconds=0, _preload_content=False))

    async def forget(self, attempt: Attempt) -> None:
        """Under Kueue, a gang's Workload once its pods are deleted for good, as its user
        would: Kueue keeps a plain pod group whose pods did not all succeed waiting for
        their replacements, its quota reserved (the probe's held 2 GPUs of quota through
        a whole run). A single pod's Workload ends with its pod."""
        if self.system != "kueue" or attempt.job.pods < 2:
            return
        group, version = KUEUE_API.split("/")
        with contextlib.suppress(ApiException):  # gone already
            await self.custom.delete_namespaced_custom_object(
                group, version, attempt.job.namespace, "workloads", attempt.group)

    async def restart(self, action: Restart) -> None:
        await self.delete(action.old.job.namespace, action.old.pod_names)
        await self.forget(action.old)
        await self.create(action.new)


def action_name(action: Action) -> str:
    attempt = action.new if isinstance(action, Restart) else action.attempt
    return f"{attempt.job.namespace}/{attempt.group}"
