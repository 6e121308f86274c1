"""GPU models in policy: `spec.gpuModels`, queues' quotas per model, and what lint says of
them, each problem at its file and line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.builders import policy_yaml
from tests.paths import BASE_POLICY
from webhook.policy.gpumodels import model_of
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy

H100 = {"name": "h100", "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}
A100 = {"name": "a100", "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}
L4 = {"name": "l4", "nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-L4"}}


def _load(tmp_path: Path, *specs: dict[str, Any]) -> Policy:
    (tmp_path / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    for i, spec in enumerate(specs, start=1):
        (tmp_path / f"{i}0-more.yaml").write_text(policy_yaml(f"more-{i}", spec))
    return load_policy(tmp_path)


def _problems(tmp_path: Path, *specs: dict[str, Any]) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        _load(tmp_path, *specs)
    return [f"{Path(p.file).name}:{p.line}: {p.message.replace(f'{tmp_path}/', '')}"
            for p in caught.value.problems]


def _queue(*models: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"name": "team-a", "namespaces": ["team-a"], "models": list(models), **more}


def test_models_and_quotas_per_model_load_in_order(tmp_path: Path) -> None:
    policy = _load(tmp_path, {"gpuModels": [H100, A100, L4], "queues": [_queue(
        {"model": "h100", "nominal": 64, "borrowingLimit": 8},
        {"model": "a100", "nominal": 128, "lendingLimit": 0}, fungibility="BorrowFirst")]})
    assert [m.name for m in policy.gpu_models] == ["h100", "a100", "l4"]
    (queue,) = policy.queues
    assert [(q.model, q.nominal, q.borrowing_limit, q.lending_limit) for q in queue.models] \
        == [("h100", 64, 8, None), ("a100", 128, None, 0)]
    assert queue.fungibility == "BorrowFirst"


def test_a_queue_keeps_to_quota_before_it_borrows_unless_told(tmp_path: Path) -> None:
    policy = _load(tmp_path, {"gpuModels": [H100], "queues": [_queue(
        {"model": "h100", "nominal": 8})]})
    assert policy.queues[0].fungibility == "NextModelFirst"


def test_a_node_is_the_first_model_whose_labels_it_has(tmp_path: Path) -> None:
    policy = _load(tmp_path, {"gpuModels": [H100, A100]})
    assert model_of(policy.gpu_models, {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
                                        "kubernetes.io/hostname": "n1"}) == "a100"
    assert model_of(policy.gpu_models, {"nvidia.com/gpu.product": "NVIDIA-L4"}) is None
    assert model_of(policy.gpu_models, {}) is None


@pytest.mark.parametrize(("specs", "expected"), [
    pytest.param(({"queues": [_queue({"model": "h200", "nominal": 8})]},),
                 ["10-more.yaml:11: queue team-a: model 'h200' is not one of the gpuModels "
                  "(none defined)"], id="unknown model"),
    pytest.param(({"gpuModels": [H100], "queues": [_queue({"model": "h100"},
                                                          {"model": "h100"})]},),
                 ["10-more.yaml:16: queue team-a: model 'h100' is listed twice"],
                 id="model listed twice"),
    pytest.param(({"gpuModels": [H100]}, {"gpuModels": [H100]}),
                 ["20-more.yaml:7: GPU model 'h100' is already defined at 10-more.yaml:7"],
                 id="model defined twice"),
    pytest.param(({"gpuModels": [{**A100, "name": "a100-spot"}, A100]},),
                 ["10-more.yaml:11: model a100 has the same nodeLabels as a100-spot; give "
                  "each model a label value of its own"], id="two models one node"),
    pytest.param(({"gpuModels": [H100, {"name": "h100-spot", "nodeLabels": {"spot": "yes"}}]},),
                 ["10-more.yaml:11: model h100-spot and h100 could both be one node "
                  "(nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3, spot=yes); give each "
                  "model a label value of its own"], id="labels that could meet"),
    pytest.param(({"gpuModels": [{"name": "h100"}]},),
                 ["10-more.yaml:7: spec.gpuModels.0: Value error, model h100 names neither "
                  "nodeLabels nor deviceAttributes: nothing tells its nodes apart"],
                 id="no labels"),
    pytest.param(({"gpuModels": [
        {"name": "h100", "deviceAttributes": {"productName": "NVIDIA H100 80GB HBM3"}},
        {"name": "h100-dra", "deviceAttributes": {"productName": "NVIDIA H100 80GB HBM3"}}]},),
                 ["10-more.yaml:11: model h100-dra has the same nodeLabels and "
                  "deviceAttributes as h100; give each model a label or attribute value of "
                  "its own"], id="two models one device"),
    pytest.param(({"gpuModels": [{**H100, "name": "H100"}]},),
                 ["10-more.yaml:7: spec.gpuModels.0.name: Value error, 'H100': model names "
                  "are lowercase letters, digits, '-' and '.', got 'H100'"], id="bad name"),
    pytest.param(({"gpuModels": [H100], "queues": [_queue({"model": "h100",
                                                           "nominal": -1})]},),
                 ["10-more.yaml:16: spec.queues.0.models.0.nominal: Input should be greater "
                  "than or equal to 0, got -1"], id="negative quota"),
    pytest.param(({"gpuModels": [H100], "queues": [_queue(fungibility="Sometimes")]},),
                 ["10-more.yaml:15: spec.queues.0.fungibility: Input should be "
                  "'NextModelFirst' or 'BorrowFirst', got 'Sometimes'"], id="bad fungibility"),
    pytest.param(({"gpuModels": [{**H100, "nodePool": "GPU pool"}]},),
                 ["10-more.yaml:10: spec.gpuModels.0.nodePool: String should match pattern "
                  "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$', got 'GPU pool'"], id="bad NodePool"),
    pytest.param(({"gpuModels": [{**H100, "nodePool": "gpu"}, {**A100, "nodePool": "gpu"}]},),
                 ["10-more.yaml:14: model a100 names NodePool gpu, as h100 does; a request "
                  "for one would grow the other's nodes"], id="one NodePool two models"),
])
def test_lint_names_each_problem_at_its_line(tmp_path: Path, specs: tuple[dict[str, Any], ...],
                                             expected: list[str]) -> None:
    assert _problems(tmp_path, *specs) == expected
