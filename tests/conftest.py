"""Fixtures shared by every test level."""

from __future__ import annotations

import os
from typing import Any

import pytest

from webhook.policy.model import ClassSpec, Policy, Rule
from webhook.sandbox.binaries import Binaries, ensure_binaries
from webhook.sandbox.gobuilding import BuildError

CLASS_SPECS: dict[str, dict[str, Any]] = {
    "inference": {
        "priorityClass": {"name": "airlock-inference", "value": 100000},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "placement": "spread", "placementLevel": "host",
    },
    "training": {
        "priorityClass": {"name": "airlock-training", "value": 50000},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "topology": {"level": "nvlink", "mode": "required"},
    },
    "scavenger": {
        "priorityClass": {"name": "airlock-scavenger", "value": 1000,
                          "preemptionPolicy": "Never"},
    },
}

RULES: list[dict[str, Any]] = [
    {"name": "serving-images", "class": "inference",
     "match": {"images": ["*vllm*", "*tritonserver*"]}},
    {"name": "kubeflow-training", "class": "training",
     "match": {"hasAnyLabel": ["training.kubeflow.org/job-name"]}},
    {"name": "lws", "class": "inference",
     "match": {"hasAnyLabel": ["leaderworkerset.sigs.k8s.io/name"]}},
    {"name": "gpu-deployments", "class": "inference",
     "match": {"ownerKinds": ["ReplicaSet", "StatefulSet"]}},
    {"name": "plain-jobs", "class": "scavenger",
     "match": {"ownerKinds": ["Job"], "inGang": False}},
]


def make_policy(**overrides: Any) -> Policy:
    """A small policy built in Python, independent of the YAML in policies/."""
    parts: dict[str, Any] = {
        "topology_levels": {"nvlink": "nvidia.com/gpu.clique", "host": "kubernetes.io/hostname"},
        "classes": {k: ClassSpec.model_validate(v) for k, v in CLASS_SPECS.items()},
        "rules": tuple(Rule.model_validate(r) for r in RULES),
        **overrides,
    }
    return Policy(**parts)


@pytest.fixture
def policy() -> Policy:
    return make_policy()


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The control plane's binaries and KWOK (built once, then cached). Under
    CI=true their absence fails the run instead of skipping."""
    try:
        return ensure_binaries(lambda line: print(line, flush=True))
    except BuildError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Kubernetes binaries missing: {e}")
        pytest.skip(f"no Kubernetes binaries: {e}")
