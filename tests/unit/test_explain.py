"""`airlock explain -o json` on realistic pods of every convention docs/admission.md names, with
the default policies in policies/: the command-line contract end to end."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.commands import airlock
from tests.paths import POLICIES, ROOT
from webhook.keys import GATE, QUEUED_ANNOTATION

PRIORITY = {"airlock-inference": 100000, "airlock-training": 50000, "airlock-scavenger": 1000}

# name: (class, gang as (name, size, source) or None)
EXPECTED: dict[str, tuple[str | None, tuple[str, int | None, str] | None]] = {
    "llama-finetune-worker-0": ("training", ("llama-finetune", None, "kubeflow")),
    "bert-mpi-worker-1": ("training", ("bert-mpi", None, "kubeflow")),
    "gpt-jobset-workers-0-2-x7f2k": ("training", ("gpt-workers", None, "jobset")),
    "ddp-sweep-3-abcde": ("training", ("ddp-sweep", None, "indexed-job")),
    "raycluster-a-gpu-group-worker-q2w9z": ("training", ("raycluster-a", None, "kuberay")),
    "coscheduled-0": ("training", ("nccl-test", None, "podgroup")),
    "kueue-group-member-1": ("training", ("sweep-7", 4, "kueue")),
    "handmade-0": ("training", ("handmade", 2, "airlock")),
    "vllm-llama-7c9d8-x2k4p": ("inference", None),
    "sklearn-iris-predictor-00001-deployment-5d9f-abcde": ("inference", None),
    "llama-405b-1-2": ("inference", ("llama-405b-1", 4, "leaderworkerset")),
    "triton-0": ("inference", None),
    "embeddings-backfill-kx8q2": ("scavenger", None),
    "opt-in-scavenger": ("scavenger", None),
    "dcgm-exporter-abcde": (None, None),
    "volcano-task-0": (None, None),
    # Kueue holds it (its gate): classified all the same, and left for Kueue to start.
    "kueue-managed-0": ("scavenger", None),
    "web-6f7b9-abcde": (None, None),
    "old-gpu-app": (None, None),
}


@pytest.fixture(scope="module")
def explained() -> dict[str, dict[str, Any]]:
    files = sorted((ROOT / "examples" / "conventions").glob("*.yaml"))
    args = [a for f in files for a in ("-f", str(f))]
    out = airlock("explain", *args, "--policies", str(POLICIES), "-o", "json")
    assert out.returncode == 0, out.stderr
    rows = [orjson.loads(line) for line in out.stdout.splitlines()]
    return {r["name"]: r for r in rows}


def test_every_pod_is_explained_with_the_contract_keys(
        explained: dict[str, dict[str, Any]]) -> None:
    assert set(explained) == set(EXPECTED)
    keys = {"name", "namespace", "workload", "class", "rule", "gang", "priorityClassName",
            "priority", "allowed", "reason", "warnings", "patch", "mutated"}
    for row in explained.values():
        assert keys <= set(row)
        assert row["workload"] == f"Pod/{row['name']}"


@pytest.mark.parametrize("name", EXPECTED)
def test_class_gang_and_patch(explained: dict[str, dict[str, Any]], name: str) -> None:
    row = explained[name]
    cls, gang = EXPECTED[name]
    assert row["class"] == cls
    assert (None if row["gang"] is None else tuple(row["gang"].values())) == gang
    assert row["allowed"] is True, row["reason"]
    spec = row["mutated"]["spec"]
    gates = [g["name"] for g in spec.get("schedulingGates", [])]
    if cls is None:
        assert row["patch"] == []
        assert row["rule"] is None
        return
    assert row["rule"]
    assert row["priorityClassName"] == f"airlock-{cls}"
    assert row["priority"] == PRIORITY[row["priorityClassName"]]
    # The default policy queues single pods of training and scavenger, not inference; a
    # pod another system holds waits for that system only.
    held = any(g != GATE for g in gates)
    single_queued = gang is None and cls != "inference" and not held
    assert (GATE in gates) == (not held and (gang is not None or single_queued))
    annotations = row["mutated"]["metadata"].get("annotations", {})
    assert (annotations.get(QUEUED_ANNOTATION) == "true") == single_queued
    assert row["mutated"]["metadata"]["labels"]["gpu-airlock.io/class"] == cls


def test_the_text_says_a_single_pod_is_queued() -> None:
    out = airlock("explain", "-f", str(ROOT / "examples" / "demo" / "scavenger-job.yaml"),
                  "-f", str(ROOT / "examples" / "demo" / "inference-deployment.yaml"),
                  "--policies", str(POLICIES))
    assert out.returncode == 0, out.stderr
    gangs = [line.strip() for line in out.stdout.splitlines() if "gang:" in line]
    assert gangs == ["gang:     - (a single pod, queued: gated until the controller admits it)",
                     *["gang:     -"] * (len(gangs) - 1)]
    assert len(gangs) > 1
