"""Preemption on the real apiserver, with KWOK ending pods as a kubelet would: a training
gang makes room among scavenger gangs by evicting one whole gang and lands where it ran;
a team under its nominal reclaims a whole gang from a borrower; a PodDisruptionBudget
holds. The test says how long the victims have run (their status, as a kubelet would)."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import json
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import GPU, policy_yaml
from tests.commands import airlock_command
from tests.kube import (
    Controllers,
    NamespaceFactory,
    PolicyFileFactory,
    all_bound,
    create_gang,
    events,
    gated,
    pods_of,
    running_since,
    until,
)
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.shells.leading import Fence
from webhook.controller.shells.remembering import recall, store
from webhook.controller.shells.sealing import SECRET
from webhook.keys import PREEMPTION_ANNOTATION, SYSTEM_NAMESPACE
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane

# Young pods may be preempted, and at once: the test cannot wait minutes.
PREEMPT_NOW = """\
apiVersion: gpu-airlock.io/v1alpha1
kind: AirlockPolicy
metadata: {name: preempt-now}
spec:
  preemption: {minRuntime: 1s, delay: "0", requeueBackoff: 1m}
"""


async def test_a_training_gang_evicts_one_whole_scavenger_gang(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory, control_plane: ControlPlane,
        session_policies: Path) -> None:
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    controllers.start()
    # Two scavenger gangs fill the cluster's 64 GPUs; `older` has run longer, so it
    # would lose more work.
    for name in ("older", "newer"):
        await create_gang(api, namespace, name, 4, cls="scavenger")

    await until(lambda: all_bound(api, namespace, "", 8), within=60)
    for p in await pods_of(api, namespace):
        await running_since(api, p, 5 if p["metadata"]["name"].startswith("older") else 1)
    newer_nodes = {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "newer")}
    await create_gang(api, namespace, "train", 4, cls="training")

    async def evicted() -> bool:
        # Deleted: KWOK, like a kubelet, ends a deleted pod within moments.
        return all(p["metadata"].get("deletionTimestamp")
                   for p in await pods_of(api, namespace, "newer"))

    await until(evicted, within=60)

    async def bound() -> bool:
        pods = await pods_of(api, namespace, "train")
        return all(not gated(p) and p["spec"].get("nodeName") for p in pods)

    await until(bound, within=60)
    train = await pods_of(api, namespace, "train")
    # Into the room the victims left (held for it, and nominated), and `older` untouched.
    assert {p["spec"]["nodeName"] for p in train} == newer_nodes
    assert not any(p["metadata"].get("deletionTimestamp")
                   for p in await pods_of(api, namespace, "older"))
    assert len(await pods_of(api, namespace, "older")) == 4
    recorded = [json.loads(a[PREEMPTION_ANNOTATION]) for p in train
                if PREEMPTION_ANNOTATION in (a := p["metadata"].get("annotations") or {})]
    assert len(recorded) == 1
    assert sorted(recorded[0]["victims"]) == [f"{namespace}/newer-{i}" for i in range(4)]
    told = await events(api, namespace)
    assert sum(m.startswith("Preempted: a gang of higher priority needs the room; evicted "
                            f"to make room for gang {namespace}/train") for m in told) == 4
    assert any(m.startswith(f"Preempting: evicting gang {namespace}/newer") for m in told)

    # The leader keeps the fair-share usage for the next one.
    kept = await client.CoreV1Api(api).read_namespaced_config_map("airlock-fair-share",
                                                                  "airlock-system")
    assert set(json.loads(kept.data["fairShare"])) == {"v", "kind", "at", "usage"}

    # `airlock status` shows it, as a person would run it.
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(control_plane.admin_kubeconfig),
                         "--policies", str(session_policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    assert shown.returncode == 0
    status = json.loads(out)
    (default,) = [q for q in status["queues"] if q["name"] == "default"]
    assert default["used"] >= 32  # `older`, and `train` once bound; whatever else runs
    assert any(p["message"].startswith(f"Preempting: evicting gang {namespace}/newer")
               for p in status["preemptions"])


async def _fill(api: client.ApiClient, namespace: str, names: tuple[str, ...], cls: str,
                hours: float = 1) -> None:
    """Gangs of 4 whole nodes, bound and said to run for `hours`."""
    for name in names:
        await create_gang(api, namespace, name, 4, cls=cls)
    for name in names:
        await until(functools.partial(all_bound, api, namespace, name, 4), within=60)
    for name in names:
        for p in await pods_of(api, namespace, name):
            await running_since(api, p, hours)


async def test_a_team_under_its_nominal_reclaims_a_whole_gang_from_a_borrower(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    lender, borrower = await namespaces(), await namespaces()
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    policy_file("91-queues.yaml", policy_yaml("e2e-queues", {"queues": [
        {"name": "lender", "namespaces": [lender], "nominal": {GPU: 32}},
        {"name": "borrower", "namespaces": [borrower], "nominal": {GPU: 32}}]}))
    controllers.start()
    # The borrower runs two training gangs, 64 GPUs: 32 of them borrowed.
    await _fill(api, borrower, ("b1", "b2"), "training")
    # The lender's gang, same priority: only a reclaim makes room.
    await create_gang(api, lender, "mine", 4, cls="training")

    def alive(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    async def reclaimed() -> bool:
        return len(alive(await pods_of(api, borrower))) == 4

    await until(reclaimed, within=60)
    await asyncio.sleep(2)  # nothing more goes
    left = alive(await pods_of(api, borrower))
    # One whole gang went; the borrower keeps the other, its nominal.
    assert len({p["metadata"]["name"].split("-")[0] for p in left}) == 1
    assert len(left) == 4
    told = await events(api, borrower)
    assert any(m.startswith("Preempted: its queue borrowed GPUs their owner now reclaims; "
                            f"evicted to make room for gang {lender}/mine") for m in told)

    async def let_go() -> bool:
        return not any(gated(p) for p in await pods_of(api, lender, "mine"))

    await until(let_go, within=60)


async def test_a_pdb_that_allows_no_disruption_is_respected(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    await client.PolicyV1Api(api).create_namespaced_pod_disruption_budget(namespace, body={
        "metadata": {"name": "keep-all"},
        "spec": {"maxUnavailable": 0, "selector": {"matchExpressions": [
            {"key": "gpu-airlock.io/gang-id", "operator": "Exists"}]}}})
    controllers.start()
    await _fill(api, namespace, ("s1", "s2"), "scavenger")
    await create_gang(api, namespace, "train", 4, cls="training")

    async def waits() -> bool:
        return any(m.startswith("Waiting: 4/4 pods present") for m in
                   await events(api, namespace, "train"))

    await until(waits, within=60)
    await asyncio.sleep(3)
    assert not any(p["metadata"].get("deletionTimestamp") for p in await pods_of(api, namespace))
    assert all(gated(p) for p in await pods_of(api, namespace, "train"))


async def test_min_runtime_protects_a_young_gang(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    """Of two scavenger gangs, the young one loses less work and would go first; it has
    run for less than the minimum runtime, so the old one goes instead."""
    policy_file("90-min-runtime.yaml", policy_yaml("min-runtime", {
        "preemption": {"minRuntime": "1h", "delay": "0", "requeueBackoff": "1m"}}))
    controllers.start()
    await _fill(api, namespace, ("old",), "scavenger", hours=5)
    await _fill(api, namespace, ("young",), "scavenger", hours=0.1)
    await create_gang(api, namespace, "train", 4, cls="training")

    async def evicted() -> bool:
        return all(p["metadata"].get("deletionTimestamp")
                   for p in await pods_of(api, namespace, "old"))

    await until(evicted, within=60)
    await asyncio.sleep(2)  # nothing more goes
    young = await pods_of(api, namespace, "young")
    assert len(young) == 4  # an evicted pod would be gone at once, not marked
    assert not any(p["metadata"].get("deletionTimestamp") for p in young)
    told = await events(api, namespace, "old")
    assert any(m.startswith("Preempted: a gang of higher priority needs the room; evicted "
                            f"to make room for gang {namespace}/train") for m in told)


async def test_a_team_with_less_recent_usage_goes_first(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    """Two teams' gangs of the same priority wait for room for two: the busy team's two
    came first, but the quiet team used far less lately, so its gang goes before the
    busy team's second."""
    busy, quiet = await namespaces(), await namespaces()
    policy_file("91-teams.yaml", policy_yaml("e2e-teams", {
        "queues": [{"name": f"{team}-{ns}", "namespaces": [ns], "nominal": {GPU: 0}}
                   for team, ns in (("busy", busy), ("quiet", quiet))],
        "preemption": {"delay": "1h"}}))
    # What a leader kept of the last day: the busy team ran 32 GPUs for 10 hours.
    core = client.CoreV1Api(api)
    now = datetime.datetime.now(datetime.UTC).timestamp()
    kept = {FAIR_SHARE_KEY: json.dumps({"at": now, "usage": {f"busy-{busy}": 32 * 36000.0}})}
    await store(core, SYSTEM_NAMESPACE, kept, Fence(None))
    assert (await recall(core, SYSTEM_NAMESPACE)).get(FAIR_SHARE_KEY) == kept[FAIR_SHARE_KEY]
    # All waiting before the controller's first round: arrival alone would admit the
    # busy team's two.
    for name in ("b1", "b2"):
        await create_gang(api, busy, name, 4, cls="training")
    await asyncio.sleep(1.1)  # a later creation second
    await create_gang(api, quiet, "q1", 4, cls="training")
    controllers.start()

    async def two_admitted() -> bool:
        pods = await pods_of(api, busy) + await pods_of(api, quiet)
        return sum(not gated(p) for p in pods) == 8

    await until(two_admitted, within=60)
    await asyncio.sleep(2)  # nothing more goes
    assert not any(gated(p) for p in await pods_of(api, quiet, "q1"))
    assert not any(gated(p) for p in await pods_of(api, busy, "b1"))
    assert all(gated(p) for p in await pods_of(api, busy, "b2"))


async def test_an_upgrade_in_the_middle_of_a_preemption_loses_nothing(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory, controller_kubeconfig: Path) -> None:
    """The version before sealed records decided a preemption, wrote it on the
    preemptor's anchor, and was stopped before it evicted anyone. The new version makes
    its record key on its first start, and finishes that preemption: the record is older
    than the key, so it is the old leader's."""
    policy_file("90-preempt-now.yaml", PREEMPT_NOW)
    before = controllers.start()
    for name in ("older", "newer"):
        await create_gang(api, namespace, name, 4, cls="scavenger")
    await until(lambda: all_bound(api, namespace, "", 8), within=60)
    before.process.kill()
    before.process.wait()
    await create_gang(api, namespace, "train", 4, cls="training")
    newer = await pods_of(api, namespace, "newer")
    nodes = sorted(p["spec"]["nodeName"] for p in newer)
    legacy = {"domain": None, "topologyKey": None, "at": time.time(),
              "victims": [f"{namespace}/{p['metadata']['name']}" for p in newer],
              "uids": [p["metadata"]["uid"] for p in newer], "nodes": nodes}
    async with await from_kubeconfig(controller_kubeconfig) as as_controller:
        await client.CoreV1Api(as_controller).patch_namespaced_pod(
            "train-0", namespace,
            body={"metadata": {"annotations": {PREEMPTION_ANNOTATION: json.dumps(legacy)}}})
    # No key before this version: its first start makes one. Both times are whole
    # seconds, and a pod made in the key's own second counts as newer (the safe side),
    # so the key is made in a later second than the pod.
    with contextlib.suppress(ApiException):
        await client.CoreV1Api(api).delete_namespaced_secret(SECRET, SYSTEM_NAMESPACE)
    await asyncio.sleep(1.1)
    controllers.start()

    async def bound() -> bool:
        pods = await pods_of(api, namespace, "train")
        return len(pods) == 4 and all(not gated(p) and p["spec"].get("nodeName")
                                      for p in pods)

    await until(bound, within=90)
    train = await pods_of(api, namespace, "train")
    assert {p["spec"]["nodeName"] for p in train} == set(nodes)
    assert len(await pods_of(api, namespace, "older")) == 4
    told = await events(api, namespace)
    assert sum(m.startswith("Preempted: ") for m in told) == 4
