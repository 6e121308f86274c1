from __future__ import annotations

from typing import Any

import pytest

from tests.builders import CLIQUE, GPU_MODELS, make_policy, pod
from webhook.admission.validating import places_pods, validate_create, validate_update
from webhook.keys import (
    CLASS_LABEL,
    CONTROLLER_IDENTITY,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    GATE,
    GPU_MODELS_ANNOTATION,
    QUEUED_ANNOTATION,
)
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.model import NamespaceAccess, Policy

restricted = make_policy(namespace_access=(
    NamespaceAccess(namespaces=("sandbox-*",), classes=("scavenger",)),))


def create(obj: dict[str, Any], policy: Policy) -> tuple[str | None, tuple[str, ...]]:
    view = PodView.parse(obj)
    v = validate_create(view, classify(view, policy), policy)
    return v.denial, v.warnings


DENIALS = [
    ("class not allowed", pod(namespace="sandbox-1").gpus(1).label(CLASS_LABEL, "inference"),
     "may not run inference"),
    ("rule class not allowed", pod(namespace="sandbox-1").gpus(1).image("vllm/vllm:1"),
     "may not run inference"),
    ("priority class escalation", pod(namespace="sandbox-1").gpus(1).owner("Job", "j")
     .set("priorityClassName", "airlock-inference"), "belongs to class inference"),
    ("invalid class label", pod().gpus(1).label(CLASS_LABEL, "vip"), "is not one of"),
    ("gang without size", pod().gpus(1).label(GANG_NAME_LABEL, "g"), "is missing"),
    ("gang with bad size", pod().gpus(1).label(GANG_NAME_LABEL, "g")
     .annotation(GANG_SIZE_ANNOTATION, "many"), "not a whole number"),
    ("fractional gpu", pod().gpus("500m").owner("Job", "j"), "not a whole number"),
    ("fractional gpu decimal", pod().gpus("0.5").owner("Job", "j"), "not a whole number"),
    ("no limit", pod().gpus(1).owner("Job", "j"), None),
    # Out of range, named with the key, the value's first characters and the range.
    ("gpus beyond any node", pod().gpus("1e200000000").owner("Job", "j"),
     "container main: resources.requests.nvidia.com/gpu='1e200000000' is not a whole number "
     "from 0 to 10000"),
    ("a limit of 5,000 digits", pod().gpus(1, limit="9" * 5000).owner("Job", "j"),
     "resources.limits.nvidia.com/gpu='999999999999999999999999'... (5000 characters) is "
     "not a whole number from 0 to 10000"),
    ("a vanishing fraction", pod().gpus("1e-200000000").owner("Job", "j"),
     "'1e-200000000' is not a whole number"),
    ("non-ASCII digits", pod().gpus("\uff18").owner("Job", "j"), "'\uff18' is not a whole"),
    ("a node named at creation", pod().gpus(1).owner("Job", "j").set("nodeName", "gpu-1"),
     "spec.nodeName 'gpu-1' puts the pod on a node directly, past the scheduler and "
     "Airlock's queue and quota"),
]


@pytest.mark.parametrize(("builder", "message"), [d[1:] for d in DENIALS],
                         ids=[d[0] for d in DENIALS])
def test_create_denials(builder: Any, message: str | None) -> None:
    obj = builder.build()
    if message is None:  # request without a limit
        del obj["spec"]["containers"][0]["resources"]["limits"]
        message = "without a limit"
    denial, _ = create(obj, restricted)
    assert denial is not None
    assert message in denial


def test_request_limit_mismatch() -> None:
    denial, _ = create(pod().gpus(2, limit=4).owner("Job", "j").build(), restricted)
    assert denial
    assert "differs from its limit" in denial


@pytest.mark.parametrize("builder", [
    pod(namespace="sandbox-1").gpus(1).owner("Job", "j"),
    pod().gpus("2").owner("Job", "j"),
    pod(namespace="kube-system").gpus("500m"),  # out of scope: not Airlock's to judge
])
def test_create_allowed(builder: Any) -> None:
    assert create(builder.build(), restricted)[0] is None


def test_unclassified_gpu_pod_is_warned_not_denied() -> None:
    denial, warnings = create(pod().gpus(1).build(), restricted)
    assert denial is None
    assert any("no Airlock policy rule" in w for w in warnings)


def gated() -> Any:
    return pod().gpus(1).label(CLASS_LABEL, "training").label(GANG_NAME_LABEL, "g").gate(GATE)


def test_gate_removal_by_a_user_is_denied(policy: Policy) -> None:
    old = PodView.parse(gated().build())
    new_obj = gated().build()
    new_obj["spec"]["schedulingGates"] = []
    v = validate_update(old, PodView.parse(new_obj), "alice", policy)
    assert v.denial
    assert "only the Airlock controller" in v.denial
    assert "alice" in v.denial


def test_gate_removal_by_the_controller_is_allowed(policy: Policy) -> None:
    new_obj = gated().build()
    new_obj["spec"]["schedulingGates"] = []
    new_obj["spec"]["nodeSelector"] = {CLIQUE: "c1"}
    v = validate_update(PodView.parse(gated().build()), PodView.parse(new_obj),
                        CONTROLLER_IDENTITY, policy)
    assert v.allowed


def test_configured_gate_remover_is_allowed() -> None:
    policy = make_policy(gate_removers=frozenset({CONTROLLER_IDENTITY, "ops-bot"}))
    new_obj = gated().build()
    new_obj["spec"]["schedulingGates"] = []
    assert validate_update(PodView.parse(gated().build()), PodView.parse(new_obj), "ops-bot",
                           policy).allowed


@pytest.mark.parametrize("key", [CLASS_LABEL, GANG_NAME_LABEL])
def test_pinned_labels_cannot_change_while_gated(policy: Policy, key: str) -> None:
    new = gated().label(key, "other").build()
    v = validate_update(PodView.parse(gated().build()), PodView.parse(new), "alice", policy)
    assert v.denial
    assert key in v.denial


def test_a_queued_single_keeps_its_mark_while_gated(policy: Policy) -> None:
    def queued() -> Any:
        return pod().gpus(1).label(CLASS_LABEL, "scavenger").annotation(
            QUEUED_ANNOTATION, "true").gate(GATE)
    new = queued().build()
    del new["metadata"]["annotations"][QUEUED_ANNOTATION]
    v = validate_update(PodView.parse(queued().build()), PodView.parse(new), "alice", policy)
    assert v.denial
    assert QUEUED_ANNOTATION in v.denial
    lifted = queued().build()
    lifted["spec"]["schedulingGates"] = []
    assert validate_update(PodView.parse(queued().build()), PodView.parse(lifted),
                           CONTROLLER_IDENTITY, policy).allowed


def test_ungated_pods_may_change_labels(policy: Policy) -> None:
    old = pod().gpus(1).label(CLASS_LABEL, "training").build()
    new = pod().gpus(1).label(CLASS_LABEL, "scavenger").build()
    assert validate_update(PodView.parse(old), PodView.parse(new), "alice", policy).allowed


@pytest.mark.parametrize(("username", "groups", "places"), [
    ("mallory", ("system:authenticated",), False),
    ("system:serviceaccount:kube-system:job-controller", (), False),
    # The kubelet makes the mirror of a static pod it runs whatever the API says.
    ("system:node:gpu-1", ("system:nodes",), True),
    ("admin", ("system:masters", "system:authenticated"), True),
])
def test_who_may_name_a_pods_node(username: str, groups: tuple[str, ...],
                                  places: bool) -> None:
    assert places_pods(username, groups) == places
    view = PodView.parse(pod().gpus(1).owner("Job", "j").set("nodeName", "gpu-1").build())
    verdict = validate_create(view, classify(view, restricted), restricted, places)
    assert verdict.allowed == places


@pytest.mark.parametrize(("named", "denial"), [
    ("h100, a100", None),
    ("a100", None),
    ("h200,a100", "annotation gpu-airlock.io/gpu-models names 'h200', which the policy does "
                  "not define; the models on offer: h100, a100, l4"),
    (" , ", "annotation gpu-airlock.io/gpu-models names no model, which the policy does not "
            "define; the models on offer: h100, a100, l4"),
    ("h100," * 20, "annotation gpu-airlock.io/gpu-models names more than 16 models or 1024 "
                   "characters"),
    ("x" * 5000, "annotation gpu-airlock.io/gpu-models names more than 16 models or 1024 "
                 "characters"),
])
def test_a_pod_may_name_only_the_gpu_models_policy_defines(named: str,
                                                            denial: str | None) -> None:
    policy = make_policy(gpu_models=GPU_MODELS)
    asking = pod().gpus(1).owner("Job", "j").annotation(GPU_MODELS_ANNOTATION, named).build()
    assert create(asking, policy)[0] == denial


def test_where_policy_defines_no_models_a_pod_that_names_one_is_told_so() -> None:
    asking = pod().gpus(1).owner("Job", "j").annotation(GPU_MODELS_ANNOTATION, "h100").build()
    assert create(asking, make_policy())[0] == (
        "annotation gpu-airlock.io/gpu-models names 'h100', which the policy does not "
        "define; the models on offer: none")
