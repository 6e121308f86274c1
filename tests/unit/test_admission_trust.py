"""What a pod says is its creator's: Airlock's own marks it came with are stripped, the
controller's records are refused, and a class or priority the namespace is not granted
cannot be picked."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import make_policy, pod, with_grant
from webhook.admission.mutating import mutate
from webhook.admission.validating import validate_create
from webhook.keys import (
    CLASS_LABEL,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    PLACEMENT_ANNOTATION,
    PREDICTED_START_ANNOTATION,
    PREEMPTION_ANNOTATION,
    QUEUED_ANNOTATION,
    RULE_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    USER_KEYS,
    airlocks_own,
)
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.model import Policy

# The shipped policy's stance: inference is granted to no namespace by default.
SHIPPED = with_grant(make_policy(), "inference")


def _admit(obj: dict[str, Any], policy: Policy = SHIPPED
           ) -> tuple[dict[str, Any], tuple[str, ...], str | None]:
    """The pod as stored after mutation, the warnings, and validation's denial."""
    view = PodView.parse(obj)
    mutation = mutate(view, classify(view, policy), policy, "CREATE")
    out = jsonpatch.apply_patch(obj, list(mutation.patch))
    stored = PodView.parse(out)
    return out, mutation.warnings, validate_create(stored, classify(stored, policy),
                                                   policy).denial


FORGED = {GANG_LABEL: "someone-elses-gang", QUEUED_ANNOTATION: "true",
          RULE_ANNOTATION: "kubeflow-training", TOPOLOGY_KEY_ANNOTATION: "kubernetes.io/os",
          GANG_EXPECTED_SIZE_ANNOTATION: "1", "gpu-airlock.io/made-up": "x"}


@pytest.mark.parametrize("builder", [
    pod().gpus(1).owner("ReplicaSet", "web-1", "apps/v1"),   # inference single: no marks
    pod().gpus(1).owner("Job", "sweep"),                      # scavenger single: queued
    pod().gpus(1),                                            # a GPU pod no rule classifies
])
def test_airlocks_marks_a_pod_comes_with_are_stripped(builder: Any) -> None:
    clean = builder.build()
    forged = builder.build()
    for key, value in FORGED.items():
        where = "labels" if key == GANG_LABEL else "annotations"
        forged["metadata"].setdefault(where, {})[key] = value
    out, _, denial = _admit(forged)
    assert denial is None
    # Airlock's keys end as the webhook writes them for the same pod without the forgery.
    assert _own(out) == _own(_admit(clean)[0])


def _own(obj: dict[str, Any]) -> dict[str, str]:
    meta = obj["metadata"]
    return {k: v for k, v in {**meta.get("labels", {}), **meta.get("annotations", {})}.items()
            if airlocks_own(k)}


@pytest.mark.parametrize("key", [PLACEMENT_ANNOTATION, PREEMPTION_ANNOTATION,
                                 PREDICTED_START_ANNOTATION])
@pytest.mark.parametrize("builder", [pod().gpus(8).label("training.kubeflow.org/job-name", "j"),
                                     pod().cpu()])  # in scope or not
def test_a_pod_created_with_a_controller_record_is_refused(builder: Any, key: str) -> None:
    obj = builder.build()
    obj["metadata"].setdefault("annotations", {})[key] = '{"victims": ["prod/vllm-0"]}'
    view = PodView.parse(obj)
    denial = validate_create(view, classify(view, SHIPPED), SHIPPED).denial
    assert denial is not None
    assert f"annotation {key} is written only by the Airlock controller" in denial


def test_user_keys_are_not_airlocks_own() -> None:
    assert not any(airlocks_own(k) for k in USER_KEYS)
    assert airlocks_own(PLACEMENT_ANNOTATION)
    assert airlocks_own(GANG_LABEL)
    assert not airlocks_own("example.com/gpu-airlock.io/x")


def test_a_namespace_may_not_ask_for_inference_by_label_unless_granted() -> None:
    asks = pod(namespace="research").gpus(8).label("training.kubeflow.org/job-name", "j") \
        .label(CLASS_LABEL, "inference")
    _, _, denial = _admit(asks.build())
    assert denial is not None
    assert "may not ask for class inference" in denial
    assert "spec.grants" in denial
    granted = with_grant(make_policy(), "inference", ("serving", "res*"))
    out, _, denial = _admit(asks.build(), granted)
    assert denial is None
    assert out["spec"]["priorityClassName"] == "airlock-inference"


def test_a_label_that_agrees_with_the_rules_needs_no_grant() -> None:
    vllm = pod(namespace="research").gpus(1).image("vllm/vllm-openai:v0.9") \
        .label(CLASS_LABEL, "inference")
    out, _, denial = _admit(vllm.build())
    assert denial is None
    assert out["spec"]["priorityClassName"] == "airlock-inference"
    # A lower class is anybody's to ask for.
    down = pod(namespace="research").gpus(1).image("vllm/vllm-openai:v0.9") \
        .label(CLASS_LABEL, "scavenger")
    assert _admit(down.build())[2] is None


def test_another_classes_priority_class_is_replaced_with_the_pods_own() -> None:
    trainer = pod(namespace="research").gpus(8).label("training.kubeflow.org/job-name", "j") \
        .set("priorityClassName", "airlock-inference").set("priority", 100000)
    out, warnings, denial = _admit(trainer.build())
    assert denial is None
    assert out["spec"]["priorityClassName"] == "airlock-training"
    assert "priority" not in out["spec"]
    assert any("replaced priorityClassName airlock-inference" in w for w in warnings)
    # Where the namespace is granted inference, its ask stands.
    granted = with_grant(make_policy(), "inference", ("research",))
    out, _, _ = _admit(trainer.build(), granted)
    assert out["spec"]["priorityClassName"] == "airlock-inference"
