"""A pod Airlock does not gate goes straight to kube-scheduler: admission keeps it to the
GPU models it may get (those it names, within its queue's) in its required node affinity.
A gated pod is left to the controller, which pins its gang to one model at ungate."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import GPU_MODELS, PRODUCT, PRODUCTS, PodBuilder, make_policy, pod
from webhook.admission.modelpins import MAX_TERMS
from webhook.admission.mutating import mutate
from webhook.keys import GATE, GPU_MODELS_ANNOTATION
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.gpumodels import GpuModel
from webhook.policy.model import Policy
from webhook.policy.queues import Queue

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _policy(*models: str, gpu_models: tuple[GpuModel, ...] = GPU_MODELS) -> Policy:
    queue = {"name": "team-a", "namespaces": ["team-a"],
             "models": [{"model": m, "nominal": 8} for m in models]}
    return make_policy(gpu_models=gpu_models, queues=(Queue.model_validate(queue),))


def _replica(namespace: str = "team-a", named: str | None = None) -> PodBuilder:
    """A Deployment's replica: inference, which does not queue, so it is never gated."""
    b = pod(namespace=namespace).gpus(1).owner("ReplicaSet", "web-1", "apps/v1")
    return b.annotation(GPU_MODELS_ANNOTATION, named) if named is not None else b


def _mutated(obj: dict[str, Any], policy: Policy) -> tuple[dict[str, Any], tuple[str, ...]]:
    view = PodView.parse(obj)
    mutation = mutate(view, classify(view, policy), policy, "CREATE")
    return jsonpatch.apply_patch(obj, list(mutation.patch)), mutation.warnings


def _terms(obj: dict[str, Any]) -> list[list[dict[str, Any]]]:
    node = ((obj["spec"].get("affinity") or {}).get("nodeAffinity") or {})
    return [t.get("matchExpressions", []) for t in
            (node.get(REQUIRED) or {}).get("nodeSelectorTerms", [])]


def _on(model: str) -> dict[str, Any]:
    return {"key": PRODUCT, "operator": "In", "values": [PRODUCTS[model]]}


@pytest.mark.parametrize(("policy", "builder", "expected"), [
    # It names two models: a term for each, in its order.
    (_policy(), _replica("elsewhere", "a100,h100"), [[_on("a100")], [_on("h100")]]),
    # Its queue lists one; it names none.
    (_policy("a100"), _replica(), [[_on("a100")]]),
    # It names two, its queue allows one of them.
    (_policy("h100"), _replica(named="a100,h100"), [[_on("h100")]]),
    # Neither its queue nor the pod narrows them: any node, models or none.
    (_policy(), _replica("elsewhere"), []),
])
def test_an_ungated_pod_is_kept_to_its_models(policy: Policy, builder: PodBuilder,
                                              expected: list[list[dict[str, Any]]]) -> None:
    mutated, warnings = _mutated(builder.build(), policy)
    assert GATE not in str(mutated["spec"].get("schedulingGates"))
    assert _terms(mutated) == expected
    assert not [w for w in warnings if "GPU models" in w]
    again, _ = _mutated(mutated, policy)
    assert again == mutated, "a second mutation changes nothing"


def test_each_term_it_has_is_kept_to_each_model() -> None:
    zone = {"key": "zone", "operator": "In", "values": ["a"]}
    spot = {"key": "spot", "operator": "DoesNotExist"}
    b = _replica("elsewhere", "h100,l4").set("affinity", {"nodeAffinity": {REQUIRED: {
        "nodeSelectorTerms": [{"matchExpressions": [zone]}, {"matchExpressions": [spot]}]}}})
    mutated, _ = _mutated(b.build(), _policy())
    assert _terms(mutated) == [[zone, _on("h100")], [zone, _on("l4")],
                               [spot, _on("h100")], [spot, _on("l4")]]


def test_a_gated_pod_is_left_to_the_controller() -> None:
    # A Job's pod is a scavenger, which queues: the controller picks its model at ungate.
    b = pod(namespace="team-a").gpus(1).owner("Job", "sweep").annotation(
        GPU_MODELS_ANNOTATION, "h100")
    mutated, _ = _mutated(b.build(), _policy())
    assert {"name": GATE} in mutated["spec"]["schedulingGates"]
    assert _terms(mutated) == []


@pytest.mark.parametrize(("policy", "builder", "why"), [
    (_policy("h100"), _replica(named="a100"), "it may get no GPU model"),
    (_policy(gpu_models=tuple(GpuModel.model_validate(
        {"name": m.lower(), "deviceAttributes": {"productName": m}}) for m in ("B200", "GB200"))),
     _replica("elsewhere", "b200"), "DRA device attributes alone"),
    (_policy(), _replica("elsewhere", "h100,a100").set("affinity", {"nodeAffinity": {
        REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": f"k{i}", "operator": "Exists"}]} for i in range(MAX_TERMS)]}}}),
     f"more than {MAX_TERMS}"),
    # Far past the bound: refused before anything is compared.
    (_policy(), _replica("elsewhere", "h100").set("affinity", {"nodeAffinity": {
        REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": f"k{i}", "operator": "Exists"}]} for i in range(40_000)]}}}),
     f"more than {MAX_TERMS} node affinity terms"),
])
def test_what_cannot_be_kept_to_its_models_is_left_with_a_warning(
        policy: Policy, builder: PodBuilder, why: str) -> None:
    obj = builder.build()
    mutated, warnings = _mutated(obj, policy)
    assert _terms(mutated) == _terms(obj)
    assert any(why in w and "not kept to its GPU models" in w for w in warnings), warnings
