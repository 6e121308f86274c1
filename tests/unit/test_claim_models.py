"""A pod names GPU models through its DRA claim: a CEL selector on the devices'
`productName` (`webhook.devices.selectors`) allows the models whose `deviceAttributes` say
that name, and the controller places the gang only on them."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from tests.builders import (
    NOW,
    SEAL,
    claim_template,
    claiming,
    gpu_nic_slices,
    node,
    pod,
    raw_member,
    review,
    shipped_policy,
)
from webhook.admission import engine
from webhook.admission.claiming import entry
from webhook.admission.decoding import decode
from webhook.admission.explaining import explain_pod
from webhook.admission.responses import complete
from webhook.controller.core.actions import Action, Admit, Wait
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.cache import Cache
from webhook.devices.claims import asks_of, claim_spec
from webhook.devices.selectors import selection
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.policy.gpumodels import GpuModel, claimed_models, selection_problem
from webhook.policy.model import Policy
from webhook.policy.queues import Queue

H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100 SXM4 80GB"
PRODUCT = 'device.attributes["gpu.nvidia.com"].productName'
MODELS = (GpuModel.model_validate({"name": "h100", "deviceAttributes": {"productName": H100}}),
          GpuModel.model_validate({"name": "a100", "deviceAttributes": {
              "gpu.nvidia.com/productName": A100}}))


def _selected(expression: str) -> dict[str, tuple[str, ...]]:
    return dict(selection({"selectors": [{"cel": {"expression": expression}}]}))


@pytest.mark.parametrize(("expression", "required"), [
    (f'{PRODUCT} == "{H100}"', {"gpu.nvidia.com/productName": (H100,)}),
    (f"'{A100}' == device.attributes['gpu.nvidia.com']['productName']",
     {"gpu.nvidia.com/productName": (A100,)}),
    (f'device.driver == "gpu.nvidia.com" && ({PRODUCT} in ["{H100}", "{A100}"])',
     {"gpu.nvidia.com/productName": (A100, H100)}),
    # Two comparisons of one attribute, both required: what both allow.
    (f'{PRODUCT} in ["{H100}", "{A100}"] && {PRODUCT} == "{A100}"',
     {"gpu.nvidia.com/productName": (A100,)}),
    # Logic that can make a comparison optional says nothing.
    (f'{PRODUCT} == "{H100}" || {PRODUCT} == "{A100}"', {}),
    (f'!({PRODUCT} == "{H100}")', {}),
    (f'{PRODUCT} == "{H100}" ? true : false', {}),
    # A comparison of what is not a string literal, or not with `==`, is not read.
    (f'{PRODUCT}.startsWith("NVIDIA H")', {}),
    (f'{PRODUCT} != "{H100}"', {}),
    ("x" * 20_000 + f' && {PRODUCT} == "{H100}"', {}),
])
def test_a_selector_requires_the_values_its_conjunction_compares_to(
        expression: str, required: dict[str, tuple[str, ...]]) -> None:
    assert _selected(expression) == required


def _template_models(*selectors: str | None, first_available: bool = False
                     ) -> tuple[str, ...] | None:
    template = claim_template("t", selector=selectors[0])
    if first_available:
        request = template["spec"]["spec"]["devices"]["requests"][0]
        exactly = request.pop("exactly")
        exactly.pop("selectors", None)
        request["firstAvailable"] = [
            {**exactly, "name": f"alt{i}", **({"selectors": [{"cel": {"expression": s}}]}
                                             if s else {})} for i, s in enumerate(selectors)]
    asks = asks_of(claim_spec(template, template=True))
    return claimed_models(MODELS, asks, shipped_policy().device_kinds)


def test_a_claim_names_the_models_whose_product_its_selector_names() -> None:
    assert _template_models(f'{PRODUCT} == "{A100}"') == ("a100",)
    assert _template_models(f'{PRODUCT} in ["{A100}", "{H100}"]') == ("h100", "a100")
    # firstAvailable: A100 first, then H100, in the order the scheduler tries them.
    assert _template_models(f'{PRODUCT} == "{A100}"', f'{PRODUCT} == "{H100}"',
                            first_available=True) == ("a100", "h100")
    # An alternative of any model, or a selector on what models do not tell apart by.
    assert _template_models(f'{PRODUCT} == "{A100}"', None, first_available=True) is None
    assert _template_models('device.attributes["gpu.nvidia.com"].brand == "Nvidia"') is None
    assert _template_models(None) is None


def test_a_claim_of_a_product_no_model_is_names_none_and_says_what_is_on_offer() -> None:
    assert _template_models(f'{PRODUCT} == "NVIDIA B200"') == ()
    kinds = shipped_policy().device_kinds

    def asks(selector: str) -> Any:
        return asks_of(claim_spec(claim_template("t", selector=selector), template=True))
    why = selection_problem(MODELS, asks(f'{PRODUCT} == "NVIDIA B200"'), kinds)
    assert why is not None
    assert "NVIDIA B200" in why
    assert f"h100 (productName={H100})" in why
    assert selection_problem(MODELS, asks(f'{PRODUCT} == "{H100}"'), kinds) is None


def _policy() -> Policy:
    """The shipped policy, with MODELS; team-a tries H100 first."""
    return shipped_policy().model_copy(update={
        "gpu_models": MODELS, "queues": (Queue.model_validate(
            {"name": "team-a", "namespaces": ["team-a"],
             "models": [{"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 8}]}),)})


def _cluster_round(selector: str | None, annotation: str | None = None) -> list[Action]:
    """A team-a gang of one 4-GPU pod, its GPUs from a template of `selector`, on one H100
    node and one A100 node told apart by their slices."""
    policy = _policy()
    cache = Cache(policy.counted(), SEAL, policy.device_kinds)
    cache.count_devices_as(policy.device_kinds, policy.gpu_models)
    cache.list_nodes([node("h-0", "a", gpus=0), node("a-0", "b", gpus=0)])
    cache.cluster.sort_models(policy.gpu_models)
    cache.list_slices([cache.parse_slice(s) for s in (
        *gpu_nic_slices("h-0"), *gpu_nic_slices("a-0", 8, "NVIDIA-A100-SXM4-80GB"))])
    template = claim_template("gpus", count=4, namespace="team-a", selector=selector)
    cache.list_claims("ResourceClaimTemplate")(
        [cache.parse_claim("ResourceClaimTemplate")(template)])
    raw: dict[str, Any] = raw_member("g", 0, gpus=0, size=1, ns="team-a",
                                     marks={"gpu-airlock.io/gpu-models": annotation}
                                     if annotation else None)
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    raw["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": "gpus"}]
    cache.list_pods([cache.parse_pod(raw)])
    return Rounds().run(policy, cache.cluster, NOW)


def test_the_controller_places_a_gang_only_on_a_model_its_claim_selects() -> None:
    def model(actions: list[Action]) -> str | None:
        return next(a.record.model for a in actions if isinstance(a, Admit))
    # The queue tries H100 first; the claim's selector allows only A100.
    assert model(_cluster_round(f'{PRODUCT} == "{A100}"')) == "a100"
    assert model(_cluster_round(None)) == "h100"


@pytest.mark.parametrize(("selector", "annotation", "said"), [
    (f'{PRODUCT} == "NVIDIA B200"', None, "select GPUs of no model the policy defines"),
    (f'{PRODUCT} == "{A100}"', "h100", "names GPU models h100"),
])
def test_a_gang_whose_claim_allows_no_model_waits_and_says_why(
        selector: str, annotation: str | None, said: str) -> None:
    waits = [a for a in _cluster_round(selector, annotation) if isinstance(a, Wait)]
    assert [w.reason for w in waits] == ["Invalid"]
    assert said in waits[0].message


def _admitted(selector: str, annotation: str | None = None) -> dict[str, Any]:
    """What the validating webhook answers for a team-a gang pod of a template of
    `selector` (and the models `annotation` names)."""
    template = claim_template("gpus", count=4, namespace="team-a", selector=selector)
    found = entry(template, "ResourceClaimTemplate")
    assert found is not None
    builder = pod("w-0", "team-a").annotation("gpu-airlock.io/gang-size", "2")
    if annotation:
        builder = builder.annotation(GPU_MODELS_ANNOTATION, annotation)
    request = decode(orjson.dumps(review(claiming(builder, template="gpus").build())))
    out = orjson.loads(complete(request.uid, engine.handle(
        engine.VALIDATE, request, _policy(), {found[1]: found[2]})))
    response: dict[str, Any] = out["response"]
    return response


def test_admission_refuses_a_claim_of_no_model_and_names_those_on_offer() -> None:
    assert _admitted(f'{PRODUCT} == "{A100}"')["allowed"]
    refused = _admitted(f'{PRODUCT} == "NVIDIA B200"')
    assert not refused["allowed"]
    assert "NVIDIA B200" in refused["status"]["message"]
    assert f"a100 (gpu.nvidia.com/productName={A100})" in refused["status"]["message"]
    conflict = _admitted(f'{PRODUCT} == "{A100}"', annotation="h100")
    assert not conflict["allowed"]
    assert "names h100, but its DRA claims select GPUs of a100" in conflict["status"]["message"]


def test_explain_shows_the_models_a_claim_allows() -> None:
    template = claim_template("gpus", count=4, namespace="team-a",
                              selector=f'{PRODUCT} == "{A100}"')
    worker = claiming(pod("w-0", "team-a"), template="gpus").build()
    found = entry(template, "ResourceClaimTemplate")
    assert found is not None
    explained = explain_pod(worker, _policy(), {}, claims={found[1]: found[2]})
    assert explained["gpuModels"] == ["a100"]
