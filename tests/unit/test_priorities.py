"""One call per pod (docs/admission.md): beside a priorityClassName it sets, mutation writes
the priority and preemption policy the PriorityClass object gives, exactly as the
apiserver's Priority plugin would, so the plugin's second run changes nothing; what the
webhook's watch does not know is left to the plugin, as before. The watch's table, from
the objects and their events, is checked here too."""

from __future__ import annotations

from typing import Any, cast

import jsonpatch
import pytest
from kubernetes_asyncio import client

from tests.builders import pod, shipped_policy
from webhook.admission.mutating import mutate
from webhook.admission.priorities import UNKNOWN, Priorities, Resolved, resolved
from webhook.admission.prioritywatching import PriorityCache
from webhook.pods import PodView
from webhook.policy.classifying import classify

POLICY = shipped_policy()
# As the cluster holds them; scavenger's value differs from the policy's 1000 on purpose:
# the object's is what the plugin checks.
CLUSTER: Priorities = {"airlock-training": Resolved(50_000, "PreemptLowerPriority"),
                       "airlock-scavenger": Resolved(7, "Never"),
                       "team-high": Resolved(900_000, "PreemptLowerPriority")}


def _priority_plugin(spec: dict[str, Any], table: Priorities) -> dict[str, Any] | str:
    """What the apiserver's Priority plugin makes of a pod on CREATE
    (plugin/pkg/admission/priority/admission.go, v1.34): the spec, or why it refuses."""
    spec = dict(spec)
    if not spec.get("priorityClassName"):
        # No class named, and no global default: priority 0, and no preemption policy.
        if spec.get("priority", 0) != 0:
            return "the integer value of priority must not be provided in pod spec"
        return {**spec, "priority": 0}
    found = table.get(spec["priorityClassName"])
    if found is None:
        return f"no PriorityClass with name {spec.get('priorityClassName')} was found"
    if spec.get("priority", found.value) != found.value:
        return "the integer value of priority must not be provided in pod spec"
    if spec.get("preemptionPolicy", found.preemption) != found.preemption:
        return "the string value of PreemptionPolicy must not be provided in pod spec"
    return {**spec, "priority": found.value, "preemptionPolicy": found.preemption}


def _admitted(obj: dict[str, Any], known: Priorities) -> tuple[dict[str, Any], int]:
    """The pod through the plugin, the webhook, and the apiserver's reinvocation: the
    plugin runs again, and the webhook is called again only if that changed the pod.
    Returns the stored pod and the webhook's calls."""
    first = _priority_plugin(obj["spec"], CLUSTER)
    assert isinstance(first, dict), first
    obj = {**obj, "spec": first}
    view = PodView.parse(obj)
    obj = jsonpatch.apply_patch(obj, list(mutate(view, classify(view, POLICY), POLICY,
                                                 "CREATE", known).patch))
    again = _priority_plugin(obj["spec"], CLUSTER)
    assert isinstance(again, dict), again
    if again == obj["spec"]:
        return obj, 1
    obj = {**obj, "spec": again}
    view = PodView.parse(obj)
    assert mutate(view, classify(view, POLICY), POLICY, "CREATE", known).patch == []
    return obj, 2


CASES = {
    "a scavenger by default": pod().gpus(1),
    "a user's class above the pod's": pod().gpus(1).set("priorityClassName", "team-high"),
    "a training gang member": pod().gang("g", 2).gpus(8),
    "a pod naming its class": pod().gang("g", 2).gpus(8).set(
        "priorityClassName", "airlock-training"),
}


@pytest.mark.parametrize("name", CASES)
def test_known_priorities_save_the_second_call_and_change_nothing(name: str) -> None:
    obj = CASES[name].build()
    before, calls_before = _admitted(obj, UNKNOWN)
    after, calls_after = _admitted(obj, CLUSTER)
    assert after == before
    assert calls_after == 1
    kept = obj["spec"].get("priorityClassName") == before["spec"]["priorityClassName"]
    assert calls_before == (1 if kept else 2)


def test_the_objects_value_is_written_not_the_policys() -> None:
    obj = pod().gpus(1).set("priority", 0).build()
    view = PodView.parse(obj)
    patched = jsonpatch.apply_patch(obj, list(mutate(
        view, classify(view, POLICY), POLICY, "CREATE", CLUSTER).patch))
    assert (patched["spec"]["priority"], patched["spec"]["preemptionPolicy"]) == (7, "Never")


def test_a_class_the_watch_does_not_know_is_left_to_the_plugin() -> None:
    obj = pod().gpus(1).set("priority", 0).set("preemptionPolicy", "Never").build()
    view = PodView.parse(obj)
    patch = mutate(view, classify(view, POLICY), POLICY, "CREATE",
                   {"airlock-training": CLUSTER["airlock-training"]}).patch
    assert {"op": "remove", "path": "/spec/priority"} in patch
    assert {"op": "remove", "path": "/spec/preemptionPolicy"} in patch


def _class(name: Any, value: Any = 5, preemption: Any = "Never") -> dict[str, Any]:
    return {"metadata": {"name": name}, "value": value, "preemptionPolicy": preemption}


@pytest.mark.parametrize(("obj", "found"), [
    (_class("a"), ("a", Resolved(5, "Never"))),
    (_class("a", -(2**31), "PreemptLowerPriority"),
     ("a", Resolved(-(2**31), "PreemptLowerPriority"))),
    (_class("a", 2**31), None),
    (_class("a", True), None),
    (_class("a", "5"), None),
    (_class("a", 5, "Sometimes"), None),
    (_class("a", 5, None), None),
    (_class(""), None),
    (_class(None), None),
    ({"value": 5}, None),
])
def test_only_a_whole_priorityclass_is_read(obj: dict[str, Any],
                                            found: tuple[str, Resolved] | None) -> None:
    assert resolved(obj) == found


def test_the_cache_knows_nothing_until_listed_nor_while_the_watch_is_lost() -> None:
    cache = PriorityCache(cast(client.ApiClient, None))
    cache._on_event("ADDED", _class("a"))
    assert cache.known == {}
    cache._on_list([resolved(_class("a")), None, resolved(_class("b", 9))])
    assert cache.known == {"a": Resolved(5, "Never"), "b": Resolved(9, "Never")}
    cache._on_event("DELETED", _class("a"))
    cache._on_event("MODIFIED", _class("b", "nine"))  # unreadable: as good as unknown
    cache._on_event("ADDED", _class("c", 3, "PreemptLowerPriority"))
    assert cache.known == {"c": Resolved(3, "PreemptLowerPriority")}
    cache._lost()
    assert cache.known == {}
    cache._on_list([resolved(_class("d"))])  # a relist replaces what was known
    assert cache.known == {"d": Resolved(5, "Never")}
