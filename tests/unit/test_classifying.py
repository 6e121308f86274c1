from __future__ import annotations

from typing import Any

import pytest

from tests.builders import pod
from webhook.conventions.base import label_value
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION, GATE
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.model import Policy

CASES: list[tuple[str, Any, bool, str | None, str | None]] = [
    # id, pod, in scope, class, rule
    ("kube-system", pod(namespace="kube-system").gpus(1), False, None, None),
    ("airlock-system", pod(namespace="airlock-system").gpus(1), False, None, None),
    ("other scheduler", pod().gpus(1).set("schedulerName", "volcano"), False, None, None),
    # Another system's gate is no way out of policy: the class is decided as ever.
    ("kueue gated", pod().gpus(1).owner("Job", "sweep").gate("kueue.x-k8s.io/admission"),
     True, "scavenger", "plain-jobs"),
    ("gated by its author", pod().gpus(1).image("vllm/vllm-openai:v0.6")
     .gate("example.com/hold"), True, "inference", "serving-images"),
    ("no accelerator", pod().cpu(), False, None, None),
    ("explicit class without gpu", pod().label(CLASS_LABEL, "scavenger"), True, "scavenger",
     "class-label"),
    ("explicit wins over rules", pod().gpus(1).image("vllm/vllm-openai:v0.6")
     .label(CLASS_LABEL, "training"), True, "training", "class-label"),
    ("serving image", pod().gpus(1).image("vllm/vllm-openai:v0.6"), True, "inference",
     "serving-images"),
    ("kubeflow", pod().gpus(8).label("training.kubeflow.org/job-name", "llama"), True,
     "training", "kubeflow-training"),
    ("deployment", pod().gpus(1).owner("ReplicaSet", "web-5d8", "apps/v1"), True,
     "inference", "gpu-deployments"),
    ("plain job", pod().gpus(1).owner("Job", "sweep"), True, "scavenger", "plain-jobs"),
    ("indexed job is a gang", pod().gpus(1).owner("Job", "ddp")
     .label("batch.kubernetes.io/job-name", "ddp")
     .annotation("batch.kubernetes.io/job-completion-index", "0"), True, "training",
     "gang-member"),
    ("our own gate is not foreign", pod().gpus(1).gate(GATE)
     .label("training.kubeflow.org/job-name", "x"), True, "training", "kubeflow-training"),
    ("bare gpu pod", pod().gpus(1), True, None, None),
]


@pytest.mark.parametrize(("builder", "in_scope", "cls", "rule"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_classify(policy: Policy, builder: Any, in_scope: bool, cls: str | None,
                  rule: str | None) -> None:
    d = classify(PodView.parse(builder.build()), policy)
    assert (d.in_scope, d.class_, d.rule) == (in_scope, cls, rule), d.reason


def test_ignored_namespace_label(policy: Policy) -> None:
    d = classify(PodView.parse(pod().gpus(1).build()), policy, {"gpu-airlock.io/ignore": "true"})
    assert not d.in_scope
    assert "ignore" in d.reason


def test_invalid_explicit_class(policy: Policy) -> None:
    d = classify(PodView.parse(pod().gpus(1).label(CLASS_LABEL, "urgent").build()), policy)
    assert d.in_scope
    assert d.class_ is None
    assert d.class_label_error
    assert "urgent" in d.class_label_error


@pytest.mark.parametrize("raw", ["0", "-1", "eight", "2.5", ""])
def test_bad_gang_size_is_flagged(policy: Policy, raw: str) -> None:
    p = pod().gpus(1).label(GANG_NAME_LABEL, "g").annotation(GANG_SIZE_ANNOTATION, raw).build()
    gang = classify(PodView.parse(p), policy).gang
    assert gang is not None
    assert gang.size is None
    assert gang.size_error


@pytest.mark.parametrize("name", ["a" * 63, "a" * 64, "x" * 200, "-bad-", "ok.name_1"])
def test_label_value_is_always_a_valid_label(name: str) -> None:
    import re
    value = label_value(name)
    assert len(value) <= 63
    assert re.fullmatch(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?", value)
    assert label_value(name) == value


@pytest.mark.parametrize("gates", [["kueue.x-k8s.io/admission"],
                                   [GATE, "example.com/hold", "example.com/more"]])
def test_a_held_gang_keeps_its_class_and_leaves_the_gang_to_its_holder(
        policy: Policy, gates: list[str]) -> None:
    builder = pod().gpus(8).label("training.kubeflow.org/job-name", "llama")
    for gate in gates:
        builder.gate(gate)
    d = classify(PodView.parse(builder.build()), policy)
    assert (d.in_scope, d.class_, d.rule, d.gang) == (True, "training", "kubeflow-training",
                                                      None)
    assert d.held == next(g for g in gates if g != GATE)
    assert f"held by '{d.held}'" in d.reason
    assert classify(PodView.parse(pod().gpus(8).gate(GATE).build()), policy).held is None
