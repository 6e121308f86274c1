"""Every example is checked as a user would run it: `airlock lint` on each example policy,
`airlock explain -o json` on each example file under examples/ (classes, gangs and their
sizes, workload names)."""

from __future__ import annotations

import fnmatch
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.commands import airlock
from tests.paths import POLICIES, POLICY_EXAMPLES, ROOT

EXAMPLE_POLICIES = sorted(p for p in POLICY_EXAMPLES.iterdir() if p.is_dir())
EXAMPLE_FILES = sorted((ROOT / "examples").rglob("*.yaml"))


def _complete(example: Path, tmp_path: Path) -> Path:
    """An add-on example ("Not a policy on its own") goes beside the defaults, as it says;
    a complete one stands alone."""
    if "Not a policy on its own" not in "".join(f.read_text() for f in example.glob("*.yaml")):
        return example
    for f in [*POLICIES.glob("*.yaml"), *example.glob("*.yaml")]:
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


@pytest.mark.parametrize("example", EXAMPLE_POLICIES, ids=lambda p: p.name)
def test_lint_example_policy(example: Path, tmp_path: Path) -> None:
    done = airlock("lint", str(_complete(example, tmp_path)))
    assert done.returncode == 0, done.stdout + done.stderr
    assert ": ok" in done.stdout


@pytest.mark.parametrize("example", EXAMPLE_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_explain_example_file(example: Path) -> None:
    done = airlock("explain", "-f", str(example), "--policies", str(POLICIES), "-o", "json")
    assert done.returncode == 0, done.stderr
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    if not rows:  # a file of CRDs, say: each object is named as making no pods
        assert "makes no pods: skipped" in done.stderr
    for row in rows:
        assert row["allowed"] is True, row["reason"]
        assert row["workload"].split("/")[0] in {
            "Pod", "Deployment", "StatefulSet", "Job", "CronJob", "JobSet", "PyTorchJob",
            "TFJob", "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob", "LeaderWorkerSet",
            "RayCluster", "RayJob"}


# examples/workloads: per workload, its pods in order as (class, gang name pattern, size)
Gang = tuple[str, int, str] | None
WORKLOADS: dict[str, list[tuple[str | None, Gang]]] = {
    "Deployment/vllm-llama": [("inference", None)] * 2,
    "StatefulSet/triton": [("inference", None)] * 3,
    "Job/nccl-allreduce": [("training", ("nccl-allreduce", 4, "indexed-job"))] * 4,
    "CronJob/embeddings-nightly": [("scavenger", None)],
    "JobSet/gpt": [("training", ("gpt-driver", 1, "jobset")),
                   *[("training", ("gpt-workers", 8, "jobset"))] * 4],
    "PyTorchJob/llama-finetune": [("training", ("llama-finetune", 4, "kubeflow"))] * 4,
    # Its GPUs claimed through DRA, from the template beside it in the file.
    "PyTorchJob/llama-dra": [("training", ("llama-dra", 4, "kubeflow"))] * 4,
    "TFJob/resnet-tf": [("training", ("resnet-tf", 3, "kubeflow"))] * 3,
    # The launcher asks for no GPU: out of Airlock's scope, like the Ray head below.
    "MPIJob/bert-mpi": [(None, None), *[("training", ("bert-mpi", 2, "kubeflow"))] * 2],
    "XGBoostJob/churn-xgb": [("training", ("churn-xgb", 2, "kubeflow"))] * 2,
    "PaddleJob/ocr-paddle": [("training", ("ocr-paddle", 2, "kubeflow"))] * 2,
    "JAXJob/gemma-jax": [("training", ("gemma-jax", 2, "kubeflow"))] * 2,
    "LeaderWorkerSet/llama-405b": [
        ("inference", ("llama-405b-0", 4, "leaderworkerset")),
        ("inference", ("llama-405b-1", 4, "leaderworkerset")),
        *[("inference", ("llama-405b-0", 4, "leaderworkerset"))] * 3,
        ("inference", ("llama-405b-1", 4, "leaderworkerset"))],
    "RayCluster/raycluster-a": [(None, None),
                                *[("training", ("raycluster-a", 3, "kuberay"))] * 3],
    "RayJob/tune-sweep": [(None, None),
                          *[("training", ("tune-sweep-?????", 2, "kuberay"))] * 2,
                          (None, None)],
}


@pytest.fixture(scope="module")
def workloads() -> tuple[dict[str, list[dict[str, Any]]], str]:
    files = sorted((ROOT / "examples" / "workloads").glob("*.yaml"))
    done = airlock("explain", *[a for f in files for a in ("-f", str(f))],
                   "--policies", str(POLICIES), "-o", "json")
    assert done.returncode == 0, done.stderr
    by_workload: dict[str, list[dict[str, Any]]] = {}
    for line in done.stdout.splitlines():
        row = orjson.loads(line)
        by_workload.setdefault(row["workload"], []).append(row)
    return by_workload, done.stderr


def test_every_example_workload_is_explained(
        workloads: tuple[dict[str, list[dict[str, Any]]], str]) -> None:
    assert set(workloads[0]) == set(WORKLOADS)


@pytest.mark.parametrize("name", WORKLOADS)
def test_example_workload_classes_and_gangs(
        workloads: tuple[dict[str, list[dict[str, Any]]], str], name: str) -> None:
    rows = workloads[0][name]
    assert len(rows) == len(WORKLOADS[name])
    for row, (cls, gang) in zip(rows, WORKLOADS[name], strict=True):
        assert row["class"] == cls, row["name"]
        if gang is None:
            assert row["gang"] is None
            continue
        assert fnmatch.fnmatchcase(row["gang"]["name"], gang[0])
        assert (row["gang"]["size"], row["gang"]["source"]) == gang[1:]
        assert row["priorityClassName"] == f"airlock-{cls}"


def test_what_is_not_shown_is_said(
        workloads: tuple[dict[str, list[dict[str, Any]]], str]) -> None:
    stderr = workloads[1]
    assert "JobSet/gpt: 4 more pod(s) of replicated job workers not shown (8 in all" in stderr
    assert "vllm-deployment.yaml:25: Service/vllm-llama makes no pods: skipped" in stderr


def test_pods_beside_their_workload_get_its_gang_size(tmp_path: Path) -> None:
    """A PyTorchJob (1 master, 3 workers) and one of its pods as the operator made it, as
    `kubectl get pytorchjob,pods -o yaml` gives them: the pod's gang size is read off the
    job beside it."""
    job = (ROOT / "examples" / "workloads" / "pytorchjob.yaml").read_text()
    made = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: llama-finetune-worker-2\n"
        "  namespace: research\n  labels: {training.kubeflow.org/job-name: llama-finetune}\n"
        "  ownerReferences: [{apiVersion: kubeflow.org/v1, kind: PyTorchJob,"
        " name: llama-finetune, uid: u1, controller: true}]\nspec:\n  containers:"
        " [{name: c, image: i, resources: {limits: {nvidia.com/gpu: '8'}}}]\n")
    both = tmp_path / "both.yaml"
    both.write_text(f"{job}---\n{made}")
    done = airlock("explain", "-f", str(both), "--policies", str(POLICIES), "-o", "json")
    rows = [orjson.loads(line) for line in done.stdout.splitlines()]
    (pod,) = [r for r in rows if r["workload"] == "Pod/llama-finetune-worker-2"]
    assert pod["gang"] == {"name": "llama-finetune", "size": 4, "source": "kubeflow"}
    alone = tmp_path / "alone.yaml"
    alone.write_text(made)
    done = airlock("explain", "-f", str(alone), "--policies", str(POLICIES), "-o", "json")
    assert orjson.loads(done.stdout)["gang"]["size"] is None
