"""The storm on a real control plane: the webhook wired in with the shipped
configurations (their failure policy swapped if asked), the workloads created at once,
each pod timed by a watch as it is stored, the webhook SIGKILLed and started again in the
middle if asked, and the apiserver's and the webhook's figures read around it."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench.common import (
    POLICIES,
    WEBHOOK_LATENCY,
    Buckets,
    Moments,
    PodClock,
    cpu_seconds,
    create,
    histograms,
)
from bench.storm import figures
from bench.storm.workloads import SERVING_IMAGE, Marks, pods_of, serving, storm
from webhook.kuberaw import json_of
from webhook.policy.loading import load_policy
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import wait_ready
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.processes import Webhook, serve_tls

NAMESPACE = "storm"
WEBHOOK = "airlock-webhook"


@dataclass(frozen=True, slots=True)
class Settings:
    pods: int
    replicas: int  # pods per Deployment
    gang_size: int  # pods per indexed Job
    nodes: int
    failure_policy: str  # both webhooks'
    restart: bool  # SIGKILL the webhook once half the pods are stored
    wait: float  # longest wait for the last pod
    rate: float | None = None  # pods a second the workloads are sent at; None: at once
    # The hook is the bare endpoint (bench/admission/echo_server.py): it marks nothing
    # and has no /metrics of its own.
    bare: bool = False


@dataclass(frozen=True, slots=True)
class Restart:
    stored: int  # pods stored when it was killed
    killed: float  # monotonic
    ready: float  # when it answered /readyz again

    @property
    def down(self) -> float:
        return self.ready - self.killed


@dataclass
class Run:
    """What one storm left: its pods as the watch last showed them, and the figures."""

    started: float  # when the workloads were sent (monotonic)
    objects: dict[str, int] = field(default_factory=dict)  # workloads by kind
    pods: list[Moments] = field(default_factory=list)
    complete: bool = False  # every pod stored within the wait
    restart: Restart | None = None
    failed_creates: dict[str, int] = field(default_factory=dict)  # owner kind -> Events
    before: str = ""  # the apiserver's /metrics, before and after
    after: str = ""
    own: dict[str, Buckets] = field(default_factory=dict)  # the webhook's own histogram
    seconds: float = 0.0  # from the workloads sent to the last pod stored
    cpu: dict[str, float] = field(default_factory=dict)  # process -> CPU seconds meanwhile
    # TCP (TLS) connections made to the webhook over the storm, those to a killed process
    # excepted: each one a handshake the webhook paid for.
    connections: int = 0

    def stored(self) -> list[float]:
        """When the watch first showed each pod, in seconds from the storm's start, in
        order: a moment after the apiserver stored it."""
        return sorted(m.seen - self.started for m in self.pods)

    def marks(self) -> dict[str, int]:
        out = dict.fromkeys(("marked", "unmarked", "partial"), 0)
        for m in self.pods:
            out[Marks.of(m.obj).state] += 1
        return out


def start_bare(workdir: Path) -> Webhook:
    """The bare endpoint where the webhook goes, with certificates of its own and the
    same TLS: the baseline for what the apiserver's side of a call costs."""
    return serve_tls(workdir, "echo", "bench.admission.echo_server", [])


async def wire(api: client.ApiClient, plane: ControlPlane, hook: Webhook,
               settings: Settings) -> None:
    await wiring.create_priority_classes(api, load_policy(POLICIES))
    await create_nodes(api, topology(Shape(nodes=settings.nodes)))
    await wiring.create_namespace(api, NAMESPACE)
    docs = wiring.webhook_configurations(hook.url, hook.certs.ca.read_bytes())
    for doc in docs:
        for webhook in doc["webhooks"]:
            webhook["failurePolicy"] = settings.failure_policy
    await wiring.apply_webhook_configurations(api, docs)
    await _calling(api, plane)


async def _calling(api: client.ApiClient, plane: ControlPlane, within: float = 30.0) -> None:
    """Until the apiserver calls the webhook: it takes configurations up from a watch, a
    moment after they are stored, and a pod created before would not be sent. Told by the
    apiserver's own count of calls, so the bare endpoint (which marks nothing) is waited
    for the same way."""
    probe = serving("probe", NAMESPACE, 1)["spec"]["template"]
    probe = {**probe, "metadata": {**probe["metadata"], "name": "storm-probe"}}
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + within
    while True:
        await core.create_namespaced_pod(NAMESPACE, body=probe, dry_run="All",
                                         _preload_content=False)
        if histograms(await asyncio.to_thread(plane.metrics), WEBHOOK_LATENCY):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"the apiserver does not call the webhook {within:g}s after "
                               f"its configurations were applied (a {SERVING_IMAGE} pod "
                               "was created without a call)")
        await asyncio.sleep(0.2)


def _cpu(plane: ControlPlane) -> dict[str, float]:
    """The CPU seconds used so far by the plane's processes and by this one (its pod
    watch)."""
    return {**{c.name: cpu_seconds(c.process.pid) for c in plane.components},
            "bench": time.process_time()}


@dataclass
class Tally:
    """The webhook's own histogram and CPU seconds over the storm, across a restart: what
    a killed process counted is kept (read just before the kill: the calls it answers
    in between are missed), and its successor counts from zero."""

    hook: Webhook
    bare: bool  # no histogram of its own to read
    own: dict[str, Buckets] = field(default_factory=dict)
    cpu: float = 0.0
    _own_from: dict[str, Buckets] = field(default_factory=dict)
    _cpu_from: float = 0.0

    def begin(self) -> None:
        self._own_from = self._own()
        self._cpu_from = cpu_seconds(self.hook.running.process.pid)

    def end(self) -> None:
        """Before a kill, and after the storm."""
        self.own = figures.plus(self.own, figures.since(self._own(), self._own_from))
        self.cpu += cpu_seconds(self.hook.running.process.pid) - self._cpu_from
        self._own_from, self._cpu_from = {}, 0.0

    def _own(self) -> dict[str, Buckets]:
        return {} if self.bare else figures.own_latency(self.hook)


def _restart(hook: Webhook) -> tuple[float, float]:
    """SIGKILL the webhook and start it again on its port; when it was killed and when it
    answered again. Blocking: run in a thread, so the pod watch keeps its clock."""
    killed = time.monotonic()
    hook.running = hook.running.restart(kill=True)
    wait_ready(WEBHOOK, hook.running.process, hook.running.log, hook.running.ready)
    return killed, time.monotonic()


async def _failed_creates(api: client.ApiClient) -> dict[str, int]:
    """The FailedCreate Events of the storm's ReplicaSets and Jobs, by kind, with their
    counts: the controllers' record of creations the apiserver refused. A lower bound:
    the event recorder drops repeats beyond its spam filter's burst."""
    response = await client.CoreV1Api(api).list_namespaced_event(
        NAMESPACE, field_selector="reason=FailedCreate", _preload_content=False)
    out: dict[str, int] = {}
    for event in (await json_of(response))["items"]:
        kind = event["involvedObject"]["kind"]
        out[kind] = out.get(kind, 0) + int(event.get("count") or 1)
    return out


async def _storm(api: client.ApiClient, plane: ControlPlane, hook: Webhook,
                 settings: Settings, progress: Callable[[str], None]) -> Run:
    objects = storm(NAMESPACE, settings.pods, settings.replicas, settings.gang_size,
                    gated=settings.bare)
    tally = Tally(hook, settings.bare)
    async with PodClock(api, NAMESPACE).running() as clock:
        before = await asyncio.to_thread(plane.metrics)
        await asyncio.to_thread(tally.begin)
        cpu = _cpu(plane)
        port = int(hook.url.rsplit(":", 1)[1])
        known = figures.connections(port)
        run = Run(time.monotonic(), before=before)
        await _send(api, objects, settings.rate)
        run.objects = dict(Counter(obj["kind"] for obj in objects))
        progress(f"{len(objects)} workloads created")
        if settings.restart:
            run.restart = await _restart_midway(clock, tally, settings)
            progress(f"webhook restarted at {run.restart.stored} pods stored; down "
                     f"{run.restart.down:.2f} s")
        try:
            await clock.until(lambda: len(clock.pods) >= settings.pods, settings.wait,
                              f"{settings.pods} pods stored")
            run.complete = True
        except TimeoutError as e:
            progress(str(e))
        run.seconds = time.monotonic() - run.started
        run.cpu = {k: v - cpu[k] for k, v in _cpu(plane).items()}
        run.connections = len(figures.connections(port) - known)
        run.after = await asyncio.to_thread(plane.metrics)
        await asyncio.to_thread(tally.end)
        run.own, run.cpu[WEBHOOK] = tally.own, tally.cpu
        run.pods = list(clock.pods.values())
    run.failed_creates = await _failed_creates(api)
    return run


async def _send(api: client.ApiClient, objects: list[dict[str, Any]],
                rate: float | None) -> None:
    """All at once, or each object when the pods before it would have been made at
    `rate` (its controller then makes its own pods in a burst of slow-start batches)."""
    if rate is None:
        await asyncio.gather(*(create(api, obj) for obj in objects))
        return
    started, sent = time.monotonic(), 0
    for obj in objects:
        await asyncio.sleep(max(0.0, started + sent / rate - time.monotonic()))
        await create(api, obj)
        sent += pods_of(obj)


async def _restart_midway(clock: PodClock, tally: Tally, settings: Settings) -> Restart:
    half = settings.pods // 2
    await clock.until(lambda: len(clock.pods) >= half, settings.wait, f"{half} pods stored")
    stored = len(clock.pods)
    await asyncio.to_thread(tally.end)
    # No new start for the tally: everything the new process counts, its own start
    # included, happened in the storm.
    killed, ready = await asyncio.to_thread(_restart, tally.hook)
    return Restart(stored, killed, ready)


async def run(plane: ControlPlane, hook: Webhook, settings: Settings,
              progress: Callable[[str], None]) -> Run:
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wire(api, plane, hook, settings)
        progress(f"{settings.nodes} nodes, webhook wired in ({settings.failure_policy})")
        return await _storm(api, plane, hook, settings, progress)

