"""What the default policy in policies/ decides for the pods docs/admission.md names."""

from __future__ import annotations

import pytest

from tests.builders import PodBuilder, pod, shipped_policy
from webhook.pods import PodView
from webhook.policy.classifying import classify

VLLM = "vllm/vllm-openai:v0.8.5"


def sts(name: str = "llm") -> PodBuilder:
    return pod().gpus(8).owner("StatefulSet", name, "apps/v1")


# id, pod, class, rule (None: Airlock leaves the pod alone)
CASES: list[tuple[str, PodBuilder, str | None, str | None]] = [
    ("gpu-operator validator", pod(namespace="gpu-operator").gpus(1), None, None),
    ("volcano pod", pod().gpus(1).set("schedulerName", "volcano"), None, None),
    ("amd gpu deployment", pod().gpus(1, "amd.com/gpu").owner("ReplicaSet", "w", "apps/v1"),
     "inference", "gpu-deployments-and-statefulsets"),
    ("vllm deployment", pod().gpus(1).image(VLLM).owner("ReplicaSet", "w", "apps/v1"),
     "inference", "serving-images"),
    ("nim", pod().gpus(1).image("nvcr.io/nim/meta/llama-3.1-8b-instruct:1.3"), "inference",
     "serving-images"),
    ("tgi", pod().gpus(1).image("ghcr.io/huggingface/text-generation-inference:3.0"),
     "inference", "serving-images"),
    ("kserve", pod().gpus(1).label("serving.kserve.io/inferenceservice", "iris"), "inference",
     "kserve"),
    ("knative", pod().gpus(1).label("serving.knative.dev/service", "hello"), "inference",
     "knative-serving"),
    ("lws", sts().label("leaderworkerset.sigs.k8s.io/name", "llm")
     .label("leaderworkerset.sigs.k8s.io/group-index", "0"), "inference", "leaderworkerset"),
    ("llm-d decode", pod().gpus(1).label("llm-d.ai/role", "decode"), "inference", "llm-d"),
    ("statefulset", sts(), "inference", "gpu-deployments-and-statefulsets"),
    ("pytorchjob", pod().gpus(8).owner("PyTorchJob", "llama", "kubeflow.org/v1")
     .label("training.kubeflow.org/job-name", "llama"), "training", "kubeflow-training"),
    ("rl job on a vllm image", pod().gpus(8).image(VLLM)
     .label("training.kubeflow.org/job-name", "grpo"), "training", "kubeflow-training"),
    ("trainjob", pod().gpus(8).owner("Job", "t-node-0")
     .label("jobset.sigs.k8s.io/jobset-name", "t")
     .label("trainer.kubeflow.org/trainjob-name", "t"), "training", "jobset-and-trainer"),
    ("ray worker", pod().gpus(1).label("ray.io/cluster", "rc"), "training", "ray"),
    ("ray serve on vllm", pod().gpus(1).image(VLLM).label("ray.io/cluster", "svc"),
     "inference", "serving-images"),
    ("plain job", pod().gpus(1).owner("Job", "embed").label("batch.kubernetes.io/job-name",
                                                            "embed"),
     "scavenger", "plain-batch-jobs"),
    ("indexed job", pod().gpus(1).owner("Job", "ddp").label("batch.kubernetes.io/job-name", "ddp")
     .label("batch.kubernetes.io/job-completion-index", "0"), "training", "gang-member"),
    ("podgroup", pod().gpus(1).label("scheduling.x-k8s.io/pod-group", "pg"), "training",
     "gang-member"),
    ("bare gpu pod", pod().gpus(1), "scavenger", "default-class"),
]


@pytest.mark.parametrize(("builder", "cls", "rule"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_default_policy_decides(builder: PodBuilder, cls: str | None, rule: str | None
                                ) -> None:
    decision = classify(PodView.parse(builder.build()), shipped_policy())
    assert (decision.class_, decision.rule) == (cls, rule), decision.reason


def test_every_default_rule_decides_some_case() -> None:
    assert {r.name for r in shipped_policy().rules} <= {c[3] for c in CASES}
