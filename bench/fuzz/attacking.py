"""The tenant of the controller fuzz: objects drawn from tests/hostile.py, created as a user
with the `edit` role in her namespaces (an impersonating client), the newest `live` kept
and the older deleted as she goes, so thousands pass through a cluster of a few hundred;
and a namespace of gangs that never complete, kept throughout. Every answer is counted:
what the apiserver stored, and what it refused, by who refused it."""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from bench.fuzz.drawing import BATCH, drawn
from tests.hostile import Hostile, hostile_objects, incomplete_gangs
from webhook.kuberaw import json_of

# Each kind's API and the name its methods take (`create_namespaced_<name>`).
APIS: dict[str, tuple[Callable[[client.ApiClient], Any], str]] = {
    "Pod": (client.CoreV1Api, "pod"),
    "Deployment": (client.AppsV1Api, "deployment"),
    "ReplicaSet": (client.AppsV1Api, "replica_set"),
    "StatefulSet": (client.AppsV1Api, "stateful_set"),
    "DaemonSet": (client.AppsV1Api, "daemon_set"),
    "Job": (client.BatchV1Api, "job"),
    "CronJob": (client.BatchV1Api, "cron_job"),
    "PodDisruptionBudget": (client.PolicyV1Api, "pod_disruption_budget"),
    "ResourceClaimTemplate": (client.ResourceV1Api, "resource_claim_template"),
}
# Objects in flight at once: a tenant's scripts, a few workload controllers.
WRITERS = 8
KEPT_EXAMPLES = 3


def refusal(e: ApiException) -> str:
    """Who refused an object: Airlock's webhook, Airlock's admission policy, RBAC, or the
    apiserver's validation."""
    said = str(e.body or "")
    if "admission webhook" in said and "gpu-airlock.io" in said:
        return "denied by Airlock's webhook"
    if "ValidatingAdmissionPolicy" in said:
        return "refused by Airlock's admission policy"
    if e.status == 403:
        return "forbidden (RBAC)"
    if e.status == 422:
        return "invalid (the apiserver's validation)"
    return f"HTTP {e.status}"


def _message(said: str) -> str:
    """What the apiserver's Status says, or the body as it came."""
    try:
        status = orjson.loads(said)
    except orjson.JSONDecodeError:
        return said.strip()
    return str(status.get("message", said)).strip() if isinstance(status, dict) else said


@dataclass
class Counts:
    created: Counter[str] = field(default_factory=Counter)  # by kind
    refused: Counter[str] = field(default_factory=Counter)  # by `refusal`
    deleted: int = 0
    # Errors of the apiserver or the connection, not answers about the object.
    errors: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    @property
    def stored(self) -> int:
        return sum(self.created.values())

    def refuse(self, why: str, kind: str, said: str) -> None:
        self.refused[why] += 1
        kept = self.examples.setdefault(why, [])
        if len(kept) < KEPT_EXAMPLES:
            kept.append(f"{kind}: {_message(said)[:300]}")


@dataclass
class Attack:
    """`objects` stored in all, as mallory (`api` impersonates her): first `gangs` gangs
    that never complete in `gangs_namespace`, then hostile objects in `namespace`, of
    which the newest `live` are kept."""

    api: client.ApiClient
    namespace: str
    gangs_namespace: str
    objects: int
    seed: int
    live: int
    gangs: int
    counts: Counts = field(default_factory=Counts)
    progress: Callable[[str], None] = print
    # Each object's number: a workload selects its pods by it.
    serial: int = 0

    async def run(self) -> None:
        await self._incomplete_gangs()
        drawing = _Drawing(self.seed)
        kept: deque[tuple[str, str]] = deque()
        try:
            await asyncio.gather(*(self._writer(drawing, kept) for _ in range(WRITERS)))
        finally:
            drawing.stop()

    async def _incomplete_gangs(self) -> None:
        bodies: list[list[dict[str, Any]]] = []
        drawn(incomplete_gangs(), self.gangs, self.seed, bodies.append)
        named: set[str] = set()
        for gang in bodies:
            # A name drawn twice would only be refused as taken.
            if gang[0]["metadata"]["name"] not in named:
                named.update(p["metadata"]["name"] for p in gang)
                for body in gang:
                    await self._create(Hostile("Pod", body), self.gangs_namespace)

    async def _writer(self, drawing: _Drawing, kept: deque[tuple[str, str]]) -> None:
        while self.counts.stored < self.objects:
            hostile = await drawing.next()
            self.serial += 1
            name = await self._create(hostile, self.namespace, self.serial)
            if name is None:
                continue
            kept.append((hostile.kind, name))
            if self.counts.stored % 500 == 0:
                self.progress(f"{self.counts.stored:,}/{self.objects:,} hostile objects "
                              f"stored, {sum(self.counts.refused.values()):,} refused")
            while len(kept) > self.live:
                await self._delete(*kept.popleft())

    async def _create(self, hostile: Hostile, namespace: str, serial: int = 0) -> str | None:
        """The object's name once stored; None when refused (counted)."""
        api, name = APIS[hostile.kind]
        create = getattr(api(self.api), f"create_namespaced_{name}")
        try:
            stored = await json_of(await create(namespace, body=hostile.made(serial),
                                                _preload_content=False))
        except ApiException as e:
            if e.status >= 500 or e.status == 0:
                self.counts.errors[f"HTTP {e.status}"] += 1
            else:
                self.counts.refuse(refusal(e), hostile.kind, str(e.body))
            return None
        except (aiohttp.ClientError, OSError) as e:
            self.counts.errors[type(e).__name__] += 1
            return None
        self.counts.created[hostile.kind] += 1
        created: str = stored["metadata"]["name"]
        return created

    async def _delete(self, kind: str, name: str) -> None:
        api, method = APIS[kind]
        delete = getattr(api(self.api), f"delete_namespaced_{method}")
        try:
            # Background: the garbage collector deletes what a workload made.
            await delete(name, self.namespace, grace_period_seconds=0,
                         propagation_policy="Background")
            self.counts.deleted += 1
        except ApiException as e:
            if e.status != 404:  # a Job's pod that ended, a pod evicted: gone already
                self.counts.errors[f"delete: HTTP {e.status}"] += 1
        except (aiohttp.ClientError, OSError) as e:
            self.counts.errors[f"delete: {type(e).__name__}"] += 1


class _Drawing:
    """Hostile objects drawn in a thread of their own, a batch at a time, seeded per batch
    (the same seed, the same objects, in the same order), as writers take them."""

    def __init__(self, seed: int) -> None:
        self.ready: queue.Queue[Hostile] = queue.Queue(maxsize=2 * BATCH)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._draw, args=(seed,), daemon=True)
        self.thread.start()

    def _draw(self, seed: int) -> None:
        batch = 0
        while not self.stopped.is_set():
            drawn(hostile_objects, BATCH, seed * 1_000 + batch, self._put, self.stopped.is_set)
            batch += 1

    def _put(self, hostile: Hostile) -> None:
        while not self.stopped.is_set():
            with contextlib.suppress(queue.Full):
                self.ready.put(hostile, timeout=0.5)
                return

    async def next(self) -> Hostile:
        while True:
            with contextlib.suppress(queue.Empty):
                return self.ready.get_nowait()
            await asyncio.sleep(0.05)

    def stop(self) -> None:
        self.stopped.set()
