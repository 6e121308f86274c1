"""The soak's moves on a real control plane (the sandbox's apiserver, kube-scheduler,
kube-controller-manager and KWOK, Airlock's webhook and controller), and the pod watch
that records what happened for `checking`.

The cluster is 8 nodes of 8 GPUs. Each wave fills it and makes room twice:
1. team B (nominal 16) runs two gangs of 2 x 8 GPUs, borrowing 16; scavenger gangs (in
   no queue) take the other 32;
2. **preemption**: team A (nominal 48) submits a gang of 4 x 8, which evicts both
   scavenger gangs, whole;
3. **reclaim**: team A submits a gang of 2 x 8; only team B's gangs run beside it, at
   team A's priority, so one of them goes to give its borrowed GPUs back.
With each of the two, a scavenger gang of one pod arrives that would gladly take the
room being freed: it must not; nor must the wave's two queued single scavenger pods,
which wait from the moment the cluster is full. Victims take a few seconds to stop once
deleted (KWOK's `pod-delete.stage.kwok.x-k8s.io/delay`, as a pod writing a checkpoint on
SIGTERM would), so for a while they are evicted but still hold their nodes. The
controller runs with
`--patch-pause`, so that applying a decision (writing the record, evicting each victim,
lifting each gate) takes seconds, and is SIGKILLed at seeded random moments (while the
wave's first gangs are admitted, and after each preemptor arrives), then started again. A
wave ends once the cluster is quiet; its pods are then deleted.

With `restarts`, each wave also restarts other parts, by SIGKILL, at seeded moments:
- the webhook while the wave's first pods are being created (its mutation fails closed
  here, so creations are refused meanwhile and retried, as a controller would);
- the apiserver or etcd (in turn) in the middle of the preemption or the reclaim.
With a `growing` namespace, its queue's gang (9 x 8 GPUs) fits no cluster of 64: the
controller asks for room with placeholders, which nothing provides; the gang is deleted
with the wave, and its placeholders must go too.
"""

from __future__ import annotations

import asyncio
import functools
import random
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from bench.soak.checking import Kept, check
from bench.soak.findings import Findings
from bench.soak.replaying import Seen
from tests import builders
from tests.builders import gang_pod
from tests.kube import gated
from webhook.controller.core.growth.placeholders import placeholder_of
from webhook.controller.shells.remembering import NAME as KEPT_CONFIG_MAP
from webhook.keys import CLASS_LABEL, PLACEHOLDER_LABEL, SYSTEM_NAMESPACE
from webhook.kubewatch import watch
from webhook.sandbox.nodes import GPU
from webhook.sandbox.processes import AirlockProcess
from webhook.sandbox.stages import TERMINATION_DELAY

# The controller's pause between writes, so a kill lands in the middle of applying.
PATCH_PAUSE = "0.3"
# A kill comes this many seconds after a preemptor arrives, at most: from before the
# decision to after the last gate is lifted (about 7 s at the pause above, victims
# stopping included).
KILL_WINDOW = 7.5
# Longest a step may take before the soak calls it stuck (a restart included).
STEP_TIMEOUT = 120.0
# How long a victim takes to stop once deleted.
STOPPING = {TERMINATION_DELAY: "3s"}
# Queued single pods a wave makes.
SINGLES = 2
# What `restarts` may name, and how often the fair share kept in the cluster is read.
RESTARTS = ("apiserver", "etcd", "webhook")
KEPT_EVERY = 0.5
# The growing queue's gang: more GPUs than the whole soak cluster has (64), so it fits
# whatever its topology (training prefers a domain, and would otherwise spread).
GROWING_SIZE = 9


@dataclass(frozen=True, slots=True)
class Namespaces:
    team_a: str  # reclaims: its nominal covers what it asks
    team_b: str  # borrows beyond its nominal
    scavenger: str  # in no queue: borrows everything it runs on
    growing: str | None = None  # asks for room that never comes

    @property
    def all(self) -> tuple[str, ...]:
        return (self.team_a, self.team_b, self.scavenger,
                *((self.growing,) if self.growing else ()))


def policy(namespaces: Namespaces) -> str:
    """The soak's own policy file, beside the default policy: young pods may be
    preempted at once (the victims have run a second), and two team queues; with a
    growing namespace, its queue, and room asked for with placeholders."""
    growing = f"""\
    - {{name: soak-team-c, namespaces: [{namespaces.growing}], nominal: {{{GPU}: 72}}}}
  capacity: {{mode: placeholders, timeout: 20s, backoff: 5s}}
""" if namespaces.growing else ""
    return f"""\
apiVersion: gpu-airlock.io/v1alpha1
kind: AirlockPolicy
metadata: {{name: soak}}
spec:
  preemption: {{minRuntime: 1s, delay: "0", requeueBackoff: 5s}}
  queues:
    - {{name: soak-team-a, namespaces: [{namespaces.team_a}], nominal: {{{GPU}: 48}}}}
    - {{name: soak-team-b, namespaces: [{namespaces.team_b}], nominal: {{{GPU}: 16}}}}
{growing}"""


def single(name: str) -> dict[str, Any]:
    """A single scavenger pod of one GPU, as a batch Job makes it: queued, never
    preempting."""
    body = builders.pod(name).gpus(1).label(CLASS_LABEL, "scavenger").build()
    del body["metadata"]["namespace"]
    return body


class Recorder:
    """Every change to the pods of the soak's namespaces and to Airlock's placeholders,
    as the watch delivers it."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = set(namespaces.all)
        self.history: list[Seen] = []
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> the pod as last seen

    def gang_pods(self) -> list[dict[str, Any]]:
        return [p for p in self.pods.values() if placeholder_of(p) is None]

    def _see(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") not in self.namespaces and placeholder_of(pod) is None:
            return
        self.history.append(Seen(time.monotonic(), kind, pod))
        if kind == "DELETED":
            self.pods.pop(meta["uid"], None)
        else:
            self.pods[meta["uid"]] = pod

    def listed(self, items: list[dict[str, Any]]) -> None:
        """A (re)list: what is no longer there was deleted meanwhile."""
        there = {p["metadata"]["uid"] for p in items}
        for uid, pod in list(self.pods.items()):
            if uid not in there:
                self._see("DELETED", pod)
        for pod in items:
            self._see("MODIFIED", pod)

    def event(self, kind: str, pod: dict[str, Any]) -> None:
        self._see(kind, pod)

    def matching(self, namespace: str, prefix: str) -> list[dict[str, Any]]:
        return [p for p in self.pods.values() if p["metadata"]["namespace"] == namespace
                and p["metadata"]["name"].startswith(prefix)]

    def bound(self, namespace: str, prefix: str, count: int) -> bool:
        pods = self.matching(namespace, prefix)
        return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)

    def quiet(self) -> bool:
        """Nothing on its way: no pod being deleted, none let go and not yet bound (but
        placeholders, which wait for room that never comes)."""
        for pod in self.gang_pods():
            if pod["metadata"].get("deletionTimestamp"):
                return False
            if not gated(pod) and not pod["spec"].get("nodeName"):
                return False
        return True


@dataclass
class Soak:
    api: client.ApiClient
    namespaces: Namespaces
    # Starts a controller (with `--patch-pause PATCH_PAUSE`); the caller stops the last.
    start: Callable[[], AirlockProcess]
    kills: int
    seed: int
    progress: Callable[[str], None] = print
    # Restarts one of RESTARTS by SIGKILL, back once it serves again; which ones to use.
    restart: Callable[[str], Awaitable[None]] | None = None
    restarts: tuple[str, ...] = ()
    stalls: list[str] = field(default_factory=list)

    async def run(self) -> Findings:
        core = client.CoreV1Api(self.api)
        recorder = Recorder(self.namespaces)
        ready = asyncio.Event()
        lister = core.list_pod_for_all_namespaces  # a few hundred pods: all, then filtered
        watching = asyncio.create_task(watch("pods", lister, lambda p: p, recorder.listed,
                                             recorder.event, ready))
        try:
            await ready.wait()
            nodes = {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0"))
                     for n in (await (await core.list_node(_preload_content=False)).json())[
                         "items"]}
            kept: list[Kept] = []
            keeping = asyncio.create_task(_read_kept(core, kept))
            waves = _Waves(self, recorder)
            kill_times = await waves.run()
            keeping.cancel()
            events: list[dict[str, Any]] = []
            for ns in self.namespaces.all:
                events += (await (await core.list_namespaced_event(
                    ns, _preload_content=False)).json())["items"]
            orphans = await _capacity_left(core)
        finally:
            watching.cancel()
        found = check(recorder.history, nodes, events, kill_times, kept, orphans,
                      waves.restarted)
        found.stalls = list(self.stalls)
        found.restarts = {kind: len(times) for kind, times in waves.restarted.items()}
        found.refused, found.unreachable = waves.refused, waves.unreachable
        found.violations["controller exits"] += waves.exits
        return found


async def _read_kept(core: client.CoreV1Api, kept: list[Kept]) -> None:
    """What the leader keeps for the next one (fair-share usage), as often as it may
    change, whatever is down meanwhile."""
    while True:
        try:
            found = await (await core.read_namespaced_config_map(
                KEPT_CONFIG_MAP, SYSTEM_NAMESPACE, _preload_content=False)).json()
            kept.append(Kept(time.monotonic(), dict(found.get("data") or {})))
        except (ApiException, aiohttp.ClientError, OSError):
            pass  # not written yet, or the apiserver is being restarted
        await asyncio.sleep(KEPT_EVERY)


async def _capacity_left(core: client.CoreV1Api) -> list[str]:
    """Placeholders still there once every gang is gone: orphans. (The soak's cluster
    serves no ProvisioningRequests, so placeholders are the only requests.)"""
    listed = await (await core.list_namespaced_pod(
        SYSTEM_NAMESPACE, label_selector=PLACEHOLDER_LABEL, _preload_content=False)).json()
    return [f"{SYSTEM_NAMESPACE}/{p['metadata']['name']}" for p in listed["items"]]


class _Waves:
    def __init__(self, soak: Soak, recorder: Recorder) -> None:
        self.soak = soak
        self.api = soak.api
        self.recorder = recorder
        self.rng = random.Random(soak.seed)
        self.kills: list[float] = []
        self.restarted: dict[str, list[float]] = {kind: [] for kind in soak.restarts}
        self.refused = 0  # pod creations refused (the webhook down, failing closed)
        self.unreachable = 0  # pod creations that found no apiserver
        self.exits: list[str] = []  # the controller exiting by itself, and its last lines
        self.killing = False
        self.controller = soak.start()

    async def run(self) -> list[float]:
        wave = 0
        watching = asyncio.create_task(self.restart_on_exit())
        try:
            while len(self.kills) < self.soak.kills:
                self.soak.progress(f"wave {wave}: {len(self.kills)}/{self.soak.kills} kills "
                                   "so far")
                await self.wave(wave)
                wave += 1
        finally:
            watching.cancel()
        return self.kills

    async def restart_on_exit(self) -> None:
        """A controller that exits by itself is started again, as its Deployment would,
        and counted: it is not a kill of the soak's."""
        while True:
            await asyncio.sleep(0.5)
            if not self.killing and self.controller.process.poll() is not None:
                self.exits.append(f"exit {self.controller.process.returncode}: "
                                  f"{self.controller.tail(3)}")
                self.soak.progress(f"the controller exited by itself: {self.exits[-1]}")
                self.controller = self.soak.start()

    async def wave(self, w: int) -> None:
        a, b, s = self.namespaces.team_a, self.namespaces.team_b, self.namespaces.scavenger
        rec = self.recorder
        # The webhook restarted while the first pods of the wave are created.
        storm = [self.create(b, f"b{w}x{i}", 2, cls="training", annotations=STOPPING)
                 for i in range(2)]
        if self.namespaces.growing:
            storm.append(self.create(self.namespaces.growing, f"c{w}", GROWING_SIZE,
                                     cls="training"))
        if "webhook" in self.restarted:
            storm.append(self.restart_after("webhook", self.rng.uniform(0.0, 0.2)))
        await asyncio.gather(*storm, self.maybe_kill())
        await self.until(f"wave {w}: team B's gangs bound",
                         lambda: rec.bound(b, f"b{w}x", 4))
        await asyncio.gather(*(self.create(s, f"s{w}x{i}", 2, cls="scavenger",
                                           annotations=STOPPING) for i in range(2)),
                             self.maybe_kill())
        await self.until(f"wave {w}: the scavenger gangs bound",
                         lambda: rec.bound(s, f"s{w}x", 4))
        # Single pods of a class that queues them, in a full cluster: they wait their
        # turn through the preemption and the reclaim, and go with the wave.
        await self.store(s, [single(f"q{w}x{i}") for i in range(SINGLES)])
        # The apiserver or etcd, in turn, in the preemption or the reclaim.
        plane = [kind for kind in ("apiserver", "etcd") if kind in self.restarted]
        during = self.rng.randrange(2)
        for step, (name, size) in enumerate(((f"p{w}", 4), (f"r{w}", 2))):
            await asyncio.gather(self.create(a, name, size, cls="training"),
                                 self.create(s, f"l{name}", 1, cls="scavenger"))
            chaos = [self.maybe_kill()]
            if plane and step == during:
                chaos.append(self.restart_after(plane[w % len(plane)],
                                                self.rng.uniform(0.1, KILL_WINDOW)))
            await asyncio.gather(*chaos)
            await self.until(f"wave {w}: {a}/{name} bound",
                             functools.partial(rec.bound, a, f"{name}-", size))
        await self.until(f"wave {w}: quiet", rec.quiet)
        core = client.CoreV1Api(self.api)
        for ns in self.namespaces.all:
            await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        await self.until(f"wave {w}: its pods gone", lambda: not rec.gang_pods())
        if self.namespaces.growing:
            await self.placeholders_gone(w)

    async def placeholders_gone(self, w: int) -> None:
        """The growing gang's placeholders go with it (the controller deletes them)."""
        core = client.CoreV1Api(self.api)
        deadline = time.monotonic() + STEP_TIMEOUT
        while left := await _capacity_left(core):
            if time.monotonic() > deadline:
                self.soak.stalls.append(f"wave {w}: placeholders {', '.join(left)} still "
                                        f"there {STEP_TIMEOUT:.0f}s after their gang went")
                return
            await asyncio.sleep(0.5)

    async def create(self, namespace: str, gang: str, size: int, **kw: Any) -> None:
        """A gang's pods."""
        await self.store(namespace, [gang_pod(gang, i, size, **kw) for i in range(size)])

    async def store(self, namespace: str, bodies: list[dict[str, Any]]) -> None:
        """Pods, each created until the apiserver stores it, as a workload controller
        retries: a refusal (the webhook down, failing closed) or no apiserver is counted
        and tried again."""
        core = client.CoreV1Api(self.api)

        async def one(body: dict[str, Any]) -> None:
            deadline = time.monotonic() + STEP_TIMEOUT
            while time.monotonic() < deadline:
                try:
                    await core.create_namespaced_pod(namespace, body=body)
                    return
                except ApiException as e:
                    if e.status == 409:  # stored by a try whose answer was lost
                        return
                    self.refused += 1
                except (aiohttp.ClientError, OSError):
                    self.unreachable += 1
                await asyncio.sleep(0.2)
            self.soak.stalls.append(f"{namespace}/{body['metadata']['name']}: not created "
                                    f"within {STEP_TIMEOUT:.0f}s")

        await asyncio.gather(*(one(body) for body in bodies))

    @property
    def namespaces(self) -> Namespaces:
        return self.soak.namespaces

    async def maybe_kill(self) -> None:
        """SIGKILL the controller at a seeded moment of what was just set off, while
        kills remain."""
        if len(self.kills) < self.soak.kills:
            await self.kill(self.rng.uniform(0.1, KILL_WINDOW))

    async def restart_after(self, kind: str, after: float) -> None:
        assert self.soak.restart is not None
        await asyncio.sleep(after)
        self.restarted[kind].append(time.monotonic())
        await self.soak.restart(kind)

    async def kill(self, after: float) -> None:
        await asyncio.sleep(after)
        self.killing = True
        process = self.controller.process
        process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait)
        self.kills.append(time.monotonic())
        self.controller = self.soak.start()
        self.killing = False

    async def until(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT
        while not done():
            if time.monotonic() > deadline:
                self.soak.stalls.append(f"{what}: not within {STEP_TIMEOUT:.0f}s")
                self.soak.progress(self.soak.stalls[-1])
                return
            await asyncio.sleep(0.1)
