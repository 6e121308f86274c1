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
room being freed: it must not. Victims take a few seconds to stop once deleted (KWOK's
`pod-delete.stage.kwok.x-k8s.io/delay`, as a pod writing a checkpoint on SIGTERM would),
so for a while they are evicted but still hold their nodes. The controller runs with
`--patch-pause`, so that applying a decision (writing the record, evicting each victim,
lifting each gate) takes seconds, and is SIGKILLed at a seeded random moment after each
preemptor arrives, then started again. A wave ends once the cluster is quiet; its pods
are then deleted.
"""

from __future__ import annotations

import asyncio
import functools
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client

from bench.soak.checking import Findings, Seen, check
from tests.kube import create_gang, gated
from webhook.keys import GANG_LABEL
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


@dataclass(frozen=True, slots=True)
class Namespaces:
    team_a: str  # reclaims: its nominal covers what it asks
    team_b: str  # borrows beyond its nominal
    scavenger: str  # in no queue: borrows everything it runs on

    @property
    def all(self) -> tuple[str, str, str]:
        return self.team_a, self.team_b, self.scavenger


def policy(namespaces: Namespaces) -> str:
    """The soak's own policy file, beside the default policy: young pods may be
    preempted at once (the victims have run a second), and two team queues."""
    return f"""\
apiVersion: gpu-airlock.io/v1alpha1
kind: AirlockPolicy
metadata: {{name: soak}}
spec:
  preemption: {{minRuntime: 1s, delay: "0", requeueBackoff: 5s}}
  queues:
    - {{name: soak-team-a, namespaces: [{namespaces.team_a}], nominal: {{{GPU}: 48}}}}
    - {{name: soak-team-b, namespaces: [{namespaces.team_b}], nominal: {{{GPU}: 16}}}}
"""


class Recorder:
    """Every change to gang pods of the soak's namespaces, as the watch delivers it."""

    def __init__(self, namespaces: Namespaces) -> None:
        self.namespaces = set(namespaces.all)
        self.history: list[Seen] = []
        self.pods: dict[str, dict[str, Any]] = {}  # uid -> the pod as last seen

    def _see(self, kind: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        if meta.get("namespace") not in self.namespaces:
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
        """Nothing on its way: no pod being deleted, none let go and not yet bound."""
        for pod in self.pods.values():
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
    stalls: list[str] = field(default_factory=list)

    async def run(self) -> Findings:
        core = client.CoreV1Api(self.api)
        recorder = Recorder(self.namespaces)
        ready = asyncio.Event()
        lister = functools.partial(core.list_pod_for_all_namespaces, label_selector=GANG_LABEL)
        watching = asyncio.create_task(watch("pods", lister, lambda p: p, recorder.listed,
                                             recorder.event, ready))
        try:
            await ready.wait()
            nodes = {n["metadata"]["name"]: int(n["status"]["allocatable"].get(GPU, "0"))
                     for n in (await (await core.list_node(_preload_content=False)).json())[
                         "items"]}
            kill_times = await _Waves(self, recorder).run()
            events: list[dict[str, Any]] = []
            for ns in self.namespaces.all:
                events += (await (await core.list_namespaced_event(
                    ns, _preload_content=False)).json())["items"]
        finally:
            watching.cancel()
        found = check(recorder.history, nodes, events, kill_times)
        found.stalls = list(self.stalls)
        return found


class _Waves:
    def __init__(self, soak: Soak, recorder: Recorder) -> None:
        self.soak = soak
        self.api = soak.api
        self.recorder = recorder
        self.rng = random.Random(soak.seed)
        self.kills: list[float] = []
        self.controller = soak.start()

    async def run(self) -> list[float]:
        wave = 0
        while len(self.kills) < self.soak.kills:
            self.soak.progress(f"wave {wave}: {len(self.kills)}/{self.soak.kills} kills so far")
            await self.wave(wave)
            wave += 1
        return self.kills

    async def wave(self, w: int) -> None:
        a, b, s = self.namespaces.team_a, self.namespaces.team_b, self.namespaces.scavenger
        rec = self.recorder
        await asyncio.gather(*(create_gang(self.api, b, f"b{w}x{i}", 2, cls="training",
                                           annotations=STOPPING) for i in range(2)))
        await self.until(f"wave {w}: team B's gangs bound",
                         lambda: rec.bound(b, f"b{w}x", 4))
        await asyncio.gather(*(create_gang(self.api, s, f"s{w}x{i}", 2, cls="scavenger",
                                           annotations=STOPPING) for i in range(2)))
        await self.until(f"wave {w}: the scavenger gangs bound",
                         lambda: rec.bound(s, f"s{w}x", 4))
        for name, size in ((f"p{w}", 4), (f"r{w}", 2)):  # the preemption, then the reclaim
            await asyncio.gather(create_gang(self.api, a, name, size, cls="training"),
                                 create_gang(self.api, s, f"l{name}", 1, cls="scavenger"))
            if len(self.kills) < self.soak.kills:
                await self.kill(self.rng.uniform(0.1, KILL_WINDOW))
            await self.until(f"wave {w}: {a}/{name} bound",
                             functools.partial(rec.bound, a, f"{name}-", size))
        await self.until(f"wave {w}: quiet", rec.quiet)
        core = client.CoreV1Api(self.api)
        for ns in self.namespaces.all:
            await core.delete_collection_namespaced_pod(ns, grace_period_seconds=0)
        await self.until(f"wave {w}: its pods gone", lambda: not rec.pods)

    @property
    def namespaces(self) -> Namespaces:
        return self.soak.namespaces

    async def kill(self, after: float) -> None:
        await asyncio.sleep(after)
        process = self.controller.process
        process.send_signal(signal.SIGKILL)
        await asyncio.to_thread(process.wait)
        self.kills.append(time.monotonic())
        self.controller = self.soak.start()

    async def until(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + STEP_TIMEOUT
        while not done():
            if time.monotonic() > deadline:
                self.soak.stalls.append(f"{what}: not within {STEP_TIMEOUT:.0f}s")
                self.soak.progress(self.soak.stalls[-1])
                return
            await asyncio.sleep(0.1)
