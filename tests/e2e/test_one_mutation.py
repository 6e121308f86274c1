"""One mutate call per GPU pod, and the same pod as before (docs/admission.md, "One call
per pod"): each pod is created through the real apiserver twice, once with the webhook
as it ran before it read PriorityClasses (`--priority-classes none`), once reading them,
and the stored pods are compared field by field, with the calls each one cost counted by
the webhook's own /metrics.

The webhooks read a policy of their own in which the cluster disagrees with it: the
scavenger PriorityClass object holds 1000 where the policy says 1001 (the object's value
must be written, or the Priority plugin refuses the pod), and inference's PriorityClass
does not exist (the pod is refused as before, by the apiserver, never by a stale guess)."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple

import orjson
import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import pod, policy_yaml
from tests.kube import NamespaceFactory, dry_run, scrape, until
from tests.paths import POLICIES
from webhook.keys import CLASS_LABEL
from webhook.kuberaw import json_of
from webhook.policy.loading import policy_files
from webhook.sandbox import wiring
from webhook.sandbox.processes import Webhook, start_webhook

# A PriorityClass a user made, above every Airlock class, and one below them all.
HIGH, LOW = ("e2e-high", 900_000), ("e2e-low", 10)
ABSENT = "airlock-e2e-absent"


class Hooks(NamedTuple):
    before: Webhook  # as before this change: the Priority plugin fills spec.priority
    after: Webhook  # reading the cluster's PriorityClasses
    shared: Webhook  # the session's, wired back afterwards


def _policies(directory: Path) -> Path:
    for f in policy_files(POLICIES):
        shutil.copy(f, directory / f.name)
    classes = directory / "10-classes.yaml"
    text = classes.read_text()
    assert "value: 1000\n" in text
    assert "name: airlock-inference\n" in text
    classes.write_text(text.replace("value: 1000\n", "value: 1001\n")
                       .replace("name: airlock-inference\n", f"name: {ABSENT}\n"))
    (directory / "90-e2e.yaml").write_text(policy_yaml("e2e-grants", {
        "grants": [{"class": "inference", "namespaces": ["e2e-*"]}]}))
    return directory


@pytest.fixture(scope="module")
def hooks(airlock: Webhook, webhook_kubeconfig: Path,
          tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hooks]:
    policies = _policies(tmp_path_factory.mktemp("one-mutation-policies"))
    before = start_webhook(tmp_path_factory.mktemp("hook-before"), policies)
    after = start_webhook(tmp_path_factory.mktemp("hook-after"), policies, extra=[
        "--kubeconfig", str(webhook_kubeconfig), "--priority-classes", "kubernetes"])
    try:
        yield Hooks(before, after, airlock)
    finally:
        for hook in (before, after):
            hook.running.process.terminate()
            hook.running.process.wait(timeout=20)


async def _mutations(hook: Webhook) -> int:
    status, text = await scrape(f"{hook.url}/metrics", ca=hook.certs.ca)
    assert status == 200
    return sum(int(float(v)) for v in re.findall(
        r'^airlock_admission_requests_total\{endpoint="mutate",[^}]*\} (\S+)$', text, re.M))


async def _wire(api: client.ApiClient, hook: Webhook, ns: str) -> None:
    """The apiserver calling `hook`, once it does (a dry-run pod reaches it)."""
    await wiring.apply_webhook_configurations(
        api, wiring.webhook_configurations(hook.url, hook.certs.ca.read_bytes()))
    seen = await _mutations(hook)

    async def reached() -> bool:
        await dry_run(api, ns, pod("probe", ns).gpus(1).build())
        return await _mutations(hook) > seen

    await until(reached)


@asynccontextmanager
async def wired(api: client.ApiClient, hook: Webhook, ns: str,
                back: Webhook) -> AsyncIterator[None]:
    """`hook` wired in; `back` again afterwards."""
    await _wire(api, hook, ns)
    try:
        yield
    finally:
        await _wire(api, back, ns)


def _pods(ns: str = "ml") -> dict[str, dict[str, Any]]:
    """The cases, by name: what the webhook sets, keeps or leaves to the apiserver."""
    return {
        # training: class set, gated, topology affinity, tolerations
        "gang-0": pod("gang-0", ns).gang("g", 2).gpus(8).build(),
        # scavenger by default; its PriorityClass's value is not the policy's
        "single": pod("single", ns).gpus(1).build(),
        # names Airlock's class itself: kept
        "named": pod("named", ns).gang("n", 2).gpus(8).set(
            "priorityClassName", "airlock-training").build(),
        # a user's class above training's: replaced, with a warning
        "escalating": pod("escalating", ns).gang("e", 2).gpus(8).set(
            "priorityClassName", HIGH[0]).build(),
        # a user's class below: kept
        "low": pod("low", ns).gpus(1).set("priorityClassName", LOW[0]).build(),
    }


# What the webhook writes or the apiserver resolves; all of it must come out the same.
SPEC = ("priority", "preemptionPolicy", "priorityClassName", "schedulingGates", "affinity",
        "tolerations", "nodeSelector", "topologySpreadConstraints")


def _outcome(stored: dict[str, Any], ns: str) -> str:
    kept = {"labels": stored["metadata"].get("labels"),
            "annotations": stored["metadata"].get("annotations"),
            **{k: stored["spec"].get(k) for k in SPEC}}
    return orjson.dumps(kept, option=orjson.OPT_SORT_KEYS).decode().replace(ns, "NS")


async def _create_all(api: client.ApiClient, hook: Webhook, ns: str
                      ) -> dict[str, tuple[str, int]]:
    """Each case created in `ns`: the stored pod (or the refusal), and the mutate calls
    it cost."""
    core = client.CoreV1Api(api)
    found = {}
    for name, obj in _pods(ns).items():
        calls = await _mutations(hook)
        try:
            stored = await json_of(await core.create_namespaced_pod(
                ns, body=obj, _preload_content=False))
            outcome = _outcome(stored, ns)
        except ApiException as e:
            outcome = f"refused {e.status}: {e.body!s}".replace(ns, "NS")
        found[name] = outcome, await _mutations(hook) - calls
    return found


@pytest.fixture
async def user_classes(api: client.ApiClient) -> AsyncIterator[None]:
    scheduling = client.SchedulingV1Api(api)
    for name, value in (HIGH, LOW):
        await scheduling.create_priority_class(body=wiring.priority_class(name, value))
    yield
    for name, _ in (HIGH, LOW):
        await scheduling.delete_priority_class(name)


@pytest.mark.usefixtures("user_classes")
async def test_each_gpu_pod_is_mutated_once_and_comes_out_as_before(
        api: client.ApiClient, hooks: Hooks, namespaces: NamespaceFactory) -> None:
    runs = {}
    for which, hook in (("before", hooks.before), ("after", hooks.after)):
        ns = await namespaces()
        async with wired(api, hook, ns, hooks.shared):
            runs[which] = await _create_all(api, hook, ns)
    before, after = runs["before"], runs["after"]
    assert not [name for name, (outcome, _) in before.items() if outcome.startswith("refused")]
    for name in _pods():
        assert after[name][0] == before[name][0], name
    assert {name: calls for name, (_, calls) in after.items()} == dict.fromkeys(_pods(), 1)
    # What made the second call: a priorityClassName the webhook set, whose spec.priority
    # the Priority plugin filled in when it ran again. A class kept: one call already.
    assert {name: calls for name, (_, calls) in before.items()} == {
        "gang-0": 2, "single": 2, "named": 1, "escalating": 2, "low": 1}
    single = orjson.loads(after["single"][0])
    assert (single["priorityClassName"], single["priority"], single["preemptionPolicy"]) == \
        ("airlock-scavenger", 1000, "Never")
    escalating = orjson.loads(after["escalating"][0])
    assert (escalating["priorityClassName"], escalating["priority"]) == \
        ("airlock-training", 50000)
    assert orjson.loads(after["gang-0"][0])["schedulingGates"]
    assert orjson.loads(after["low"][0])["priority"] == LOW[1]


async def test_a_class_without_its_priorityclass_is_refused_as_before(
        api: client.ApiClient, hooks: Hooks, namespaces: NamespaceFactory) -> None:
    """Inference's PriorityClass does not exist: the webhook has no value to write, so the
    apiserver's Priority plugin refuses the pod, as it did before; never a guess."""
    outcomes = []
    for hook in (hooks.before, hooks.after):
        ns = await namespaces()
        async with wired(api, hook, ns, hooks.shared):
            obj = pod("served", ns).gpus(1).label(CLASS_LABEL, "inference").build()
            with pytest.raises(ApiException) as refused:
                await client.CoreV1Api(api).create_namespaced_pod(ns, body=obj)
            outcomes.append((refused.value.status,
                             str(refused.value.body).replace(ns, "NS")))
    assert outcomes[0] == outcomes[1]
    assert outcomes[1][0] == 403
    assert f"no PriorityClass with name {ABSENT}" in outcomes[1][1]


async def test_a_priorityclass_made_after_the_webhook_started_is_written_at_once(
        api: client.ApiClient, hooks: Hooks, namespaces: NamespaceFactory) -> None:
    """The watch, not a list at start: made now, the class is known to the next pod."""
    ns = await namespaces()
    scheduling = client.SchedulingV1Api(api)
    async with wired(api, hooks.after, ns, hooks.shared):
        await scheduling.create_priority_class(body=wiring.priority_class(ABSENT, 100_000))
        try:
            await asyncio.sleep(1)  # the watch's lag, and the apiserver's own informer's
            calls = await _mutations(hooks.after)
            stored = await json_of(await client.CoreV1Api(api).create_namespaced_pod(
                ns, body=pod("served", ns).gpus(1).label(CLASS_LABEL, "inference").build(),
                _preload_content=False))
            assert await _mutations(hooks.after) - calls == 1
            assert (stored["spec"]["priorityClassName"], stored["spec"]["priority"]) == \
                (ABSENT, 100_000)
        finally:
            await scheduling.delete_priority_class(ABSENT)
