"""Priority only as policy gives it: a pod in Airlock's scope keeps a priorityClassName
only where it ranks no higher than its class's, or a grant lets its namespace ask for it.
Mutation replaces an escalation with the class's PriorityClass; validation refuses one
still there (the mutating webhook skipped)."""

from __future__ import annotations

from typing import Any, NamedTuple

import jsonpatch
import pytest

from tests.builders import PodBuilder, make_policy, pod, with_grant
from webhook.admission.mutating import mutate
from webhook.admission.prioritizing import value_of
from webhook.admission.validating import validate_create
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.model import Grant, Policy

SHIPPED = with_grant(make_policy(), "inference")
# A team's own PriorityClass, and Kubernetes' own, granted to one namespace each.
GRANTING = SHIPPED.model_copy(update={"grants": (
    Grant.model_validate({"priorityClasses": ["team-high"], "namespaces": ["research-*"]}),
    Grant.model_validate({"priorityClasses": ["system-node-critical"],
                          "namespaces": ["gpu-health"]}),
    Grant.model_validate({"class": "inference", "namespaces": ["serving"]}))})
OVERRIDING = make_policy(classes={**SHIPPED.classes, "training": SHIPPED.classes[
    "training"].model_copy(update={"priority_class": SHIPPED.classes[
        "training"].priority_class.model_copy(update={"override_user": True})})})


def trainer(namespace: str = "ml") -> PodBuilder:
    return pod(namespace=namespace).gpus(8).label("training.kubeflow.org/job-name", "t")


def asking(builder: PodBuilder, name: str, priority: int | None) -> PodBuilder:
    """The pod as the apiserver's Priority plugin leaves it: its class name resolved."""
    builder.set("priorityClassName", name)
    return builder if priority is None else builder.set("priority", priority)


class Case(NamedTuple):
    pod: PodBuilder
    policy: Policy
    # The priorityClassName the pod is stored with.
    stored: str
    # What mutation says, in part (None: nothing about priority).
    warning: str | None
    # What validation says of the pod had mutation been skipped (None: it passes).
    denial: str | None


CASES = {
    "no class named: the class's": Case(trainer(), SHIPPED, "airlock-training", None, None),
    "the class's own": Case(asking(trainer(), "airlock-training", 50000), SHIPPED,
                            "airlock-training", None, None),
    "system-cluster-critical on a training pod": Case(
        asking(trainer(), "system-cluster-critical", 2_000_000_000), SHIPPED,
        "airlock-training",
        "replaced priorityClassName system-cluster-critical with airlock-training: priority "
        "2000000000 is above class training's 50000",
        "priorityClassName system-cluster-critical is not this pod's to ask for: priority "
        "2000000000 is above class training's 50000, with no grant in namespace ml "
        "(spec.grants); remove it, and the pod gets class training's airlock-training"),
    "system-node-critical, known without spec.priority (explain)": Case(
        asking(trainer(), "system-node-critical", None), SHIPPED, "airlock-training",
        "priority 2000001000 is above class training's 50000", "is not this pod's"),
    "a team's class above the pod's": Case(
        asking(trainer(), "team-high", 60000), SHIPPED, "airlock-training",
        "priority 60000 is above class training's 50000", "priority 60000 is above"),
    "a team's class below the pod's: kept, with a word": Case(
        asking(trainer(), "team-low", 10), SHIPPED, "team-low",
        "kept the pod's priorityClassName team-low", None),
    "a team's class above, granted to the namespace": Case(
        asking(trainer("research-nlp"), "team-high", 60000), GRANTING, "team-high", None,
        None),
    "a grant for another namespace grants nothing here": Case(
        asking(trainer(), "system-node-critical", 2_000_001_000), GRANTING,
        "airlock-training", "with no grant in namespace ml", "with no grant in namespace ml"),
    "Kubernetes' own class, granted": Case(
        asking(trainer("gpu-health"), "system-node-critical", 2_000_001_000), GRANTING,
        "system-node-critical", None, None),
    "inference's class on a training pod": Case(
        asking(trainer(), "airlock-inference", 100000), SHIPPED, "airlock-training",
        "no grant for class inference in namespace ml", "no grant for class inference"),
    "inference's class where the class is granted": Case(
        asking(trainer("serving"), "airlock-inference", 100000), GRANTING,
        "airlock-inference", None, None),
    # Training needs no grant: its PriorityClass is anyone's to ask for, as its label is.
    "training's class on a scavenger pod": Case(
        asking(pod().gpus(1).owner("Job", "sweep"), "airlock-training", 50000), SHIPPED,
        "airlock-training", None, None),
    "a lower class on an inference pod": Case(
        asking(pod().gpus(1).image("vllm/vllm-openai:v0.9"), "airlock-scavenger", 1000),
        SHIPPED, "airlock-scavenger", None, None),
    # A gate of its own puts a pod out of no rule: scenario 4 of the issue.
    "inference's class on a pod that holds itself": Case(
        asking(pod().gpus(1).owner("Job", "sweep").gate("example.com/hold"),
               "airlock-inference", 100000), SHIPPED, "airlock-scavenger",
        "no grant for class inference", "no grant for class inference"),
    "Kubernetes' own class on a pod Kueue holds": Case(
        asking(trainer().gate("kueue.x-k8s.io/admission"), "system-cluster-critical",
               2_000_000_000), SHIPPED, "airlock-training", "is above class training's",
        "is above class training's"),
    "overrideUser replaces what ranks lower, without a word": Case(
        asking(trainer(), "team-low", 10), OVERRIDING, "airlock-training", None, None),
    "a class whose value is not known here is kept, with a word": Case(
        asking(trainer(), "team-unknown", None), SHIPPED, "team-unknown", "kept", None),
}


def _mutated(obj: dict[str, Any], policy: Policy) -> tuple[dict[str, Any], tuple[str, ...]]:
    view = PodView.parse(obj)
    mutation = mutate(view, classify(view, policy), policy, "CREATE")
    return jsonpatch.apply_patch(obj, list(mutation.patch)), mutation.warnings


def _denial(obj: dict[str, Any], policy: Policy) -> str | None:
    view = PodView.parse(obj)
    return validate_create(view, classify(view, policy), policy).denial


@pytest.mark.parametrize("name", CASES)
def test_a_pod_keeps_a_priority_only_as_policy_gives_it(name: str) -> None:
    case = CASES[name]
    obj = case.pod.build()
    stored, warnings = _mutated(obj, case.policy)
    assert stored["spec"]["priorityClassName"] == case.stored
    said = [w for w in warnings if "priorityClassName" in w]
    if case.warning is None:
        assert said == []
    else:
        assert len(said) == 1, said
        assert case.warning in said[0]
    # Once replaced, the stale spec.priority goes too, or the apiserver refuses the pod.
    if case.stored != obj["spec"].get("priorityClassName"):
        assert "priority" not in stored["spec"]
    # Validation passes what mutation leaves, and refuses what it would have replaced.
    assert _denial(stored, case.policy) is None
    denial = _denial(obj, case.policy)
    if case.denial is None:
        assert denial is None
    else:
        assert denial is not None
        assert case.denial in denial


@pytest.mark.parametrize(("name", "resolved", "expected"), [
    ("airlock-inference", None, 100000), ("system-cluster-critical", None, 2_000_000_000),
    ("team-high", None, None), ("team-high", 60000, 60000), (None, None, None),
    # What the apiserver resolved wins over what policy says the class is worth.
    ("airlock-training", 40000, 40000),
])
def test_the_value_a_priority_class_gives(name: str | None, resolved: int | None,
                                          expected: int | None) -> None:
    assert value_of(SHIPPED, name, resolved) == expected
