"""The canary of the controller fuzz: another team's gang, created, admitted, deleted,
again and again, each timed from the moment it fits to its admission (every gate of
Airlock's lifted), both read from one pod watch.

It fits when the nodes have room for it as kube-scheduler counts room (a node's GPUs less
those of every pod bound there and not finished) and no pod the controller let go is
still on its way to a node: the controller keeps room for those until they bind, for up
to its `--reservation-timeout`. Until then the canary waits for room, which is no fault
of the controller's; from then on every moment counts."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes_asyncio import client

from tests.kube import create_gang, events, pod_gpus
from webhook.keys import GANG_NAME_LABEL, GATE

# The controller's --reservation-timeout: what it let go holds room this long at most.
PROMISE = 120.0
# A canary not admitted this long after it fits failed; one that never fits in
# FIT_TIMEOUT is counted apart, as is one whose pods outlive GONE_TIMEOUT once deleted.
ADMIT_TIMEOUT = 60.0
FIT_TIMEOUT = 300.0
GONE_TIMEOUT = 60.0
# The canary: a training gang of two 8-GPU pods (two whole nodes).
PODS, GPUS = 2, 8


def _uid(pod: Mapping[str, Any]) -> str:
    uid: str = pod["metadata"]["uid"]
    return uid


@dataclass
class Room:
    """The GPUs each node has free, and the pods let go but not yet bound, by uid."""

    allocatable: dict[str, int]
    held: dict[str, tuple[str, int]] = field(default_factory=dict)
    used: Counter[str] = field(default_factory=Counter)
    let_go: dict[str, float] = field(default_factory=dict)  # since when

    def see(self, pod: Mapping[str, Any], now: float) -> None:
        uid, spec = _uid(pod), pod.get("spec") or {}
        self.gone(uid, keep_let_go=True)
        asked = pod_gpus(pod)
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        node = spec.get("nodeName")
        if asked and not finished and node:
            self.held[uid] = (node, asked)
            self.used[node] += asked
        if asked and not finished and not node and not spec.get("schedulingGates") \
                and not pod["metadata"].get("deletionTimestamp"):
            self.let_go.setdefault(uid, now)
        else:
            self.let_go.pop(uid, None)

    def gone(self, uid: str, keep_let_go: bool = False) -> None:
        if (held := self.held.pop(uid, None)) is not None:
            self.used[held[0]] -= held[1]
        if not keep_let_go:
            self.let_go.pop(uid, None)

    def fits(self, now: float, besides: set[str]) -> bool:
        """Whether the canary fits now (its own pods, `besides`, not in the way)."""
        if any(now - since < PROMISE for uid, since in self.let_go.items()
               if uid not in besides):
            return False
        return sum(max(0, free - self.used[node]) // GPUS
                   for node, free in self.allocatable.items()) >= PODS


@dataclass
class Sample:
    name: str
    created: float
    fit: float | None = None
    admitted: float | None = None
    outcome: str = "admitted"  # or why not
    told: list[str] = field(default_factory=list)  # its events, when it failed

    @property
    def seconds(self) -> float | None:
        """From when it fit to its admission; 0 when the controller found room before
        the watch showed it."""
        if self.admitted is None:
            return None
        return max(0.0, self.admitted - (self.fit or self.admitted))


@dataclass
class Canary:
    api: client.ApiClient
    namespace: str
    room: Room
    samples: list[Sample] = field(default_factory=list)
    # The current gang's pods: name -> (uid, when seen without Airlock's gate).
    members: dict[str, tuple[str, float | None]] = field(default_factory=dict)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def current(self) -> Sample | None:
        return self.samples[-1] if self.samples else None

    def see(self, kind: str, pod: Mapping[str, Any], now: float) -> None:
        """A change the pod watch shows: the canary's pods, and the room."""
        meta = pod["metadata"]
        if kind == "DELETED":
            self.room.gone(_uid(pod))
        else:
            self.room.see(pod, now)
        sample = self.current
        if sample is not None and meta["namespace"] == self.namespace and \
                meta["name"].startswith(f"{sample.name}-"):
            if kind == "DELETED":
                self.members.pop(meta["name"], None)
            else:
                before = self.members.get(meta["name"], ("", None))[1]
                lifted = not any(g.get("name") == GATE
                                 for g in pod["spec"].get("schedulingGates") or [])
                self.members[meta["name"]] = (_uid(pod), before or (now if lifted else None))
        self._check(now)

    def _check(self, now: float) -> None:
        sample = self.current
        if sample is None or sample.admitted is not None:
            return
        if sample.fit is None and self.room.fits(now, {u for u, _ in self.members.values()}):
            sample.fit = now
        lifted = [t for _, t in self.members.values() if t is not None]
        if len(lifted) == PODS:
            sample.admitted = max(lifted)
        self.changed.set()

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            await self._once(f"canary-{len(self.samples)}")

    async def _once(self, name: str) -> None:
        self.members = {}
        sample = Sample(name, time.monotonic())
        self.samples.append(sample)
        await create_gang(self.api, self.namespace, name, PODS, gpus=GPUS, cls="training")
        # From its last pod's creation: it cannot be admitted before it is whole.
        sample.created = time.monotonic()
        self._check(sample.created)
        while sample.admitted is None:
            now = time.monotonic()
            if sample.fit is not None and now - sample.fit > ADMIT_TIMEOUT:
                sample.outcome = f"not admitted within {ADMIT_TIMEOUT:.0f} s of fitting"
            elif sample.fit is None and now - sample.created > FIT_TIMEOUT:
                sample.outcome = f"no room for it within {FIT_TIMEOUT:.0f} s"
            else:
                await self._changed()
                continue
            sample.told = await events(self.api, self.namespace, name)
            break
        await client.CoreV1Api(self.api).delete_collection_namespaced_pod(
            self.namespace, label_selector=f"{GANG_NAME_LABEL}={name}", grace_period_seconds=0)
        deadline = time.monotonic() + GONE_TIMEOUT
        while self.members and time.monotonic() < deadline:
            await self._changed()
        if self.members:
            sample.outcome += f"; its pods still there {GONE_TIMEOUT:.0f} s after deletion"

    async def _changed(self) -> None:
        self.changed.clear()
        try:
            await asyncio.wait_for(self.changed.wait(), 0.5)
        except TimeoutError:
            self._check(time.monotonic())  # room kept for a pod let go may lapse
