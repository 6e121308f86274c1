from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import CLIQUE, PodBuilder, make_policy, pod, with_queued
from webhook.admission import mutating
from webhook.admission.mutating import mutate
from webhook.keys import (
    CLASS_LABEL,
    GANG_LABEL,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    GATE,
    QUEUED_ANNOTATION,
    RULE_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
)
from webhook.operators.karpenter.keys import DO_NOT_DISRUPT
from webhook.patchops import escape
from webhook.pods import PodView
from webhook.policy.capacity import CapacitySpec
from webhook.policy.classifying import classify
from webhook.policy.model import Policy


def run(obj: dict[str, Any], policy: Policy, operation: str = "CREATE") -> tuple[
        list[Any], dict[str, Any]]:
    view = PodView.parse(obj)
    patch = mutate(view, classify(view, policy), policy, operation).patch
    return list(patch), jsonpatch.apply_patch(obj, list(patch))


PODS = {
    "kubeflow worker": pod().gpus(8).label("training.kubeflow.org/job-name", "llama")
    .set("priority", 0).set("tolerations", [{"key": "other", "operator": "Exists"}]),
    "airlock gang with affinity": pod().gpus(8).label(GANG_NAME_LABEL, "g")
    .annotation(GANG_SIZE_ANNOTATION, "4").set("affinity", {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]},
            {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["b200"]}]}]}}}),
    "deployment replica": pod().gpus(1).owner("ReplicaSet", "web-1", "apps/v1")
    .label("pod-template-hash", "abc").set("priority", 0).set("preemptionPolicy",
                                                              "PreemptLowerPriority"),
    "scavenger job": pod().gpus(1).owner("Job", "sweep"),
    "lws group": pod().gpus(8).label("leaderworkerset.sigs.k8s.io/name", "llm")
    .label("leaderworkerset.sigs.k8s.io/group-index", "0")
    .annotation("leaderworkerset.sigs.k8s.io/size", "2"),
    "out of scope": pod().cpu(),
    "bare gpu pod": pod().gpus(1),
    "training single": pod().gpus(1).label(CLASS_LABEL, "training"),
    # Found by bench.fuzz: an empty rule the pod wrote itself was kept, and none recorded.
    "class label, empty rule": pod().gpus(1).label(CLASS_LABEL, "training")
    .annotation(RULE_ANNOTATION, ""),
}


@pytest.mark.parametrize("name", PODS)
def test_mutation_is_idempotent(policy: Policy, name: str) -> None:
    _, once = run(PODS[name].build(), policy)
    again, _ = run(once, policy)
    assert again == []


@pytest.mark.parametrize("name", PODS)
def test_patch_touches_no_user_container(policy: Policy, name: str) -> None:
    obj = PODS[name].build()
    _, out = run(obj, policy)
    assert out["spec"]["containers"] == obj["spec"]["containers"]


def test_training_gang_gets_everything(policy: Policy) -> None:
    obj = PODS["kubeflow worker"].build()
    _, out = run(obj, policy)
    spec, meta = out["spec"], out["metadata"]
    assert spec["priorityClassName"] == "airlock-training"
    # The Priority plugin already set spec.priority; a stale value next to a new class
    # name is rejected by the apiserver, so it must go.
    assert "priority" not in spec
    assert {"name": GATE} in spec["schedulingGates"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} \
        in spec["tolerations"]
    assert {"key": "other", "operator": "Exists"} in spec["tolerations"]
    assert meta["labels"][CLASS_LABEL] == "training"
    assert meta["labels"][GANG_LABEL] == "llama"
    assert meta["annotations"][RULE_ANNOTATION] == "kubeflow-training"
    assert meta["annotations"][TOPOLOGY_KEY_ANNOTATION] == CLIQUE
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
        {"key": CLIQUE, "operator": "Exists"}]}]


@pytest.mark.parametrize(("builder", "marked"), [
    (pod().gpus(8).label(CLASS_LABEL, "training"), "true"),
    # The author's own value stays.
    (pod().gpus(8).label(CLASS_LABEL, "training").annotation(DO_NOT_DISRUPT, "false"), "false"),
    (pod().gpus(1).label(CLASS_LABEL, "scavenger"), None),
])
def test_protected_classes_are_kept_from_karpenters_consolidation(
        policy: Policy, builder: PodBuilder, marked: str | None) -> None:
    _, out = run(builder.build(), policy)
    assert out["metadata"]["annotations"].get(DO_NOT_DISRUPT) == marked


def test_no_class_is_protected_when_policy_protects_none() -> None:
    unprotected = make_policy(capacity=CapacitySpec(protect=()))
    _, out = run(pod().gpus(8).label(CLASS_LABEL, "training").build(), unprotected)
    assert DO_NOT_DISRUPT not in out["metadata"]["annotations"]


def test_required_topology_is_added_to_every_existing_term(policy: Policy) -> None:
    _, out = run(PODS["airlock gang with affinity"].build(), policy)
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert len(terms) == 2
    for term in terms:
        assert term["matchExpressions"][0]["key"] == "gpu"
        assert {"key": CLIQUE, "operator": "Exists"} in term["matchExpressions"]


def test_gate_only_at_creation(policy: Policy) -> None:
    _, out = run(PODS["kubeflow worker"].build(), policy, operation="UPDATE")
    assert "schedulingGates" not in out["spec"]


def test_preemption_policy_removed_with_priority(policy: Policy) -> None:
    _, out = run(PODS["deployment replica"].build(), policy)
    assert out["spec"]["priorityClassName"] == "airlock-inference"
    assert "priority" not in out["spec"]
    assert "preemptionPolicy" not in out["spec"]
    spread = out["spec"]["topologySpreadConstraints"]
    assert spread[0]["topologyKey"] == "kubernetes.io/hostname"


def test_user_priority_class_is_kept_with_a_warning(policy: Policy) -> None:
    obj = PODS["scavenger job"].set("priorityClassName", "team-high").build()
    view = PodView.parse(obj)
    mutation = mutate(view, classify(view, policy), policy, "CREATE")
    out = jsonpatch.apply_patch(obj, list(mutation.patch))
    assert out["spec"]["priorityClassName"] == "team-high"
    assert any("team-high" in w for w in mutation.warnings)


def test_out_of_scope_and_unclassified_pods_are_untouched(policy: Policy) -> None:
    assert run(PODS["out of scope"].build(), policy)[0] == []
    assert run(PODS["bare gpu pod"].build(), policy)[0] == []


def test_keys_with_slashes_are_escaped(policy: Policy) -> None:
    patch, _ = run(pod().gpus(1).owner("Job", "j").label("x", "y").build(), policy)
    assert any(op["path"] == "/metadata/labels/gpu-airlock.io~1class" for op in patch)


# name: (pod, policy or None for the test policy, operation, gated, marked queued)
SINGLES: dict[str, tuple[Any, Policy | None, str, bool, bool]] = {
    "scavenger job, by default": (pod().gpus(1).owner("Job", "sweep"), None, "CREATE",
                                  True, True),
    "training single, by default": (PODS["training single"], None, "CREATE", True, True),
    "inference replica, by default": (PODS["deployment replica"], None, "CREATE", False,
                                      False),
    "inference replica, queued: true": (
        PODS["deployment replica"], with_queued(make_policy(), "inference", True), "CREATE",
        True, True),
    "scavenger job, queued: false": (
        pod().gpus(1).owner("Job", "sweep"), with_queued(make_policy(), "scavenger", False),
        "CREATE", False, False),
    "a gang member is marked by its gang, not as a single": (
        PODS["kubeflow worker"], None, "CREATE", True, False),
    "an update never gates": (pod().gpus(1).owner("Job", "sweep"), None, "UPDATE", False,
                              False),
    "a pod that names its node is never gated": (
        pod().gpus(1).owner("Job", "sweep").set("nodeName", "gpu-1"), None, "CREATE", False,
        False),
    "already gated by Kueue": (pod().gpus(1).owner("Job", "sweep")
                               .gate("kueue.x-k8s.io/admission"), None, "CREATE", False, False),
    "another scheduler": (pod().gpus(1).owner("Job", "sweep").set("schedulerName", "volcano"),
                          None, "CREATE", False, False),
    "out of scope": (PODS["out of scope"], None, "CREATE", False, False),
    "carrying Airlock's gate already": (pod().gpus(1).owner("Job", "sweep").gate(GATE), None,
                                        "CREATE", True, True),
}


@pytest.mark.parametrize("name", SINGLES)
def test_which_single_pods_wait_in_their_queue(policy: Policy, name: str) -> None:
    builder, stated, operation, gated, marked = SINGLES[name]
    obj = builder.build()
    _, out = run(obj, stated or policy, operation)
    assert ([g["name"] for g in out["spec"].get("schedulingGates", [])].count(GATE)
            == int(gated))
    assert (out["metadata"].get("annotations", {}).get(QUEUED_ANNOTATION) == "true") == marked
    # A second mutation (the apiserver's reinvocation) adds nothing.
    assert run(out, stated or policy, operation)[0] == []


def test_a_pod_another_system_holds_gets_its_class_but_no_gate_or_gang(
        policy: Policy) -> None:
    obj = pod().gpus(8).label("training.kubeflow.org/job-name", "llama") \
        .gate("example.com/hold").build()
    _, out = run(obj, policy)
    spec, labels = out["spec"], out["metadata"]["labels"]
    assert spec["priorityClassName"] == "airlock-training"
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} \
        in spec["tolerations"]
    assert labels[CLASS_LABEL] == "training"
    # Its holder starts it: no gate of Airlock's beside that one, no gang to admit whole.
    assert spec["schedulingGates"] == [{"name": "example.com/hold"}]
    assert GANG_LABEL not in labels
    assert QUEUED_ANNOTATION not in out["metadata"].get("annotations", {})


def test_what_a_hostile_pod_brings_is_not_kept_between_reviews(policy: Policy) -> None:
    # A mutating webhook sees a pod before the apiserver validates it: a gang's name or a
    # key may be megabytes long. Memoized, a thousand of them would be gigabytes.
    memos = (escape.cached, mutating._gang_label.cached)
    for memo in memos:
        memo.cache_clear()
    reviews = 40
    for i in range(reviews):
        obj = pod().gpus(1).gang(f"{i}" + "g" * 10_000, 2) \
            .label(f"gpu-airlock.io/{i}" + "x" * 10_000, "forged").build()
        assert run(obj, policy)[0]
    # Only the few short keys Airlock writes itself are kept.
    assert [memo.cache_info().currsize < reviews / 2 for memo in memos] == [True, True]
