"""The checkpoint handshake on the real apiserver: a victim is told first (the deadline on
the pod, a condition, an event) and evicted as soon as it states a checkpoint made since,
or at the deadline if it stays silent; the work it lost counts from its checkpoint.

KWOK runs no containers, so the test writes the answer a job's watcher would write
(docs/checkpointing.md): `gpu-airlock.io/checkpointed-at` on the victim's own pods."""

from __future__ import annotations

import datetime
import re
import time
from typing import Any

from kubernetes_asyncio import client

from tests.kube import (
    Controllers,
    NamespaceFactory,
    PolicyFileFactory,
    all_bound,
    create_gang,
    events,
    pods_of,
    running_since,
    until,
)
from webhook.keys import (
    CHECKPOINTED_AT_ANNOTATION,
    PREEMPTION_NOTICE_ANNOTATION,
    PREEMPTION_NOTICE_CONDITION,
)


def _policy(grace: str) -> str:
    return f"""\
apiVersion: gpu-airlock.io/v1alpha1
kind: AirlockPolicy
metadata: {{name: notices}}
spec:
  preemption: {{minRuntime: 1s, delay: "0", requeueBackoff: 1m, checkpointGrace: {grace}}}
"""


def _condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    return next((c for c in pod["status"].get("conditions") or []
                 if c["type"] == PREEMPTION_NOTICE_CONDITION), None)


async def _told(api: client.ApiClient, namespaces: NamespaceFactory,
                controllers: Controllers, policy_file: PolicyFileFactory, grace: str
                ) -> tuple[str, float]:
    """With `grace` to checkpoint, fill the cluster with two scavenger gangs (`newer` the
    cheaper victim), let a training gang preempt, and wait for `newer`'s notice: the
    namespace, and the notice's deadline."""
    namespace = await namespaces()
    policy_file("90-notices.yaml", _policy(grace))
    controllers.start()
    for name in ("older", "newer"):
        await create_gang(api, namespace, name, 4, cls="scavenger")
    await until(lambda: all_bound(api, namespace, "", 8), within=60)
    for p in await pods_of(api, namespace):
        await running_since(api, p, 5 if p["metadata"]["name"].startswith("older") else 1)
    await create_gang(api, namespace, "train", 4, cls="training")

    async def noticed() -> bool:
        return all(PREEMPTION_NOTICE_ANNOTATION in (p["metadata"].get("annotations") or {})
                   and _condition(p) is not None
                   for p in await pods_of(api, namespace, "newer"))

    await until(noticed, within=60)
    victims = await pods_of(api, namespace, "newer")
    for p in victims:
        assert (_condition(p) or {}).get("status") == "True"
        assert not p["metadata"].get("deletionTimestamp")
    (deadline,) = {p["metadata"]["annotations"][PREEMPTION_NOTICE_ANNOTATION] for p in victims}

    async def each_told() -> bool:  # events go out in the background
        told = await events(api, namespace, "newer")
        return sum(m.startswith("PreemptionNotice: ") for m in told) == 4

    await until(each_told, within=15)
    # The other gang is never told: one gang is enough.
    assert not any(PREEMPTION_NOTICE_ANNOTATION in (p["metadata"].get("annotations") or {})
                   for p in await pods_of(api, namespace, "older"))
    return namespace, datetime.datetime.fromisoformat(
        deadline.replace("Z", "+00:00")).timestamp()


async def _evicted(api: client.ApiClient, namespace: str) -> bool:
    return all(p["metadata"].get("deletionTimestamp")
               for p in await pods_of(api, namespace, "newer"))


def _lost(told: list[str]) -> set[float]:
    """The GPU-hours each `Preempted` event says its pod lost."""
    return {float(m.group(1)) for text in told
            if (m := re.search(r"losing ([0-9.]+) GPU-hours", text))
            and text.startswith("Preempted: ")}


async def test_a_victim_that_answers_is_evicted_at_once_and_loses_little(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    namespace, deadline = await _told(api, namespaces, controllers, policy_file, "10m")
    assert deadline - time.time() > 500
    # The job saves its work and says so, on each of its pods.
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for p in await pods_of(api, namespace, "newer"):
        await client.CoreV1Api(api).patch_namespaced_pod(
            p["metadata"]["name"], namespace,
            body={"metadata": {"annotations": {CHECKPOINTED_AT_ANNOTATION: now}}})
    answered = time.monotonic()
    await until(lambda: _evicted(api, namespace), within=30)
    assert time.monotonic() - answered < 30
    # Lost: the seconds since the checkpoint, not the hour it ran.
    assert _lost(await events(api, namespace, "newer")) == {0.0}
    await until(lambda: all_bound(api, namespace, "train", 4), within=60)


async def test_a_silent_victim_is_evicted_at_the_deadline_and_loses_all_it_did(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    namespace, deadline = await _told(api, namespaces, controllers, policy_file, "20s")
    await until(lambda: _evicted(api, namespace), within=60)
    # Not before the deadline (the annotation's second, rounded down), soon after it.
    assert time.time() >= deadline - 1
    # The gang's 32 GPUs, for the hour it ran and the 20 s it was given.
    (lost,) = _lost(await events(api, namespace, "newer"))
    assert 32.0 <= lost <= 32.5
    await until(lambda: all_bound(api, namespace, "train", 4), within=60)
