"""What DRA claims ask for and what ResourceSlices offer, as both halves count them
(webhook.devices): the claim rules, device matching, and the pool generations."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import claim_template, dra_slice
from webhook.devices.claims import Ask, asks_of, claim_spec, claims_gpus, demand, named
from webhook.devices.kinds import DeviceKind, resource_of
from webhook.devices.slices import counts, node_of, pool_of
from webhook.values import MAX_DEVICES

GPU = DeviceKind("gpu.nvidia.com", "gpu.nvidia.com", {"gpu.nvidia.com/type": "gpu"})
MIG = DeviceKind("mig.nvidia.com", "gpu.nvidia.com", {"gpu.nvidia.com/type": "mig"})
CHANNEL = DeviceKind("compute-domain-default-channel.nvidia.com", "compute-domain.nvidia.com",
                     {"compute-domain.nvidia.com/type": "channel"}, gpu=False, level="nvlink")
KINDS = {k.device_class: k for k in (GPU, MIG, CHANNEL)}


def _request(**fields: Any) -> dict[str, Any]:
    return {"name": "r", "exactly": fields}


@pytest.mark.parametrize(("requests", "expected"), [
    # ExactCount asks for `count`, 1 by default.
    ([_request(deviceClassName="gpu.nvidia.com", count=8)], {GPU.resource: 8}),
    ([_request(deviceClassName="gpu.nvidia.com")], {GPU.resource: 1}),
    # Requests add up; a class policy does not map counts nothing.
    ([_request(deviceClassName="gpu.nvidia.com", count=2),
      _request(deviceClassName="gpu.nvidia.com", count=3),
      _request(deviceClassName="nic.example.com", count=4)], {GPU.resource: 5}),
    # All: the most any node offers (here 8).
    ([_request(deviceClassName="gpu.nvidia.com", allocationMode="All")], {GPU.resource: 8}),
    # adminAccess reaches devices without allocating them.
    ([_request(deviceClassName="gpu.nvidia.com", count=8, adminAccess=True)], {}),
    # firstAvailable: the first alternative policy maps.
    ([{"name": "r", "firstAvailable": [
        {"name": "a", "deviceClassName": "nic.example.com", "count": 9},
        {"name": "b", "deviceClassName": "mig.nvidia.com", "count": 2},
        {"name": "c", "deviceClassName": "gpu.nvidia.com", "count": 1}]}],
     {MIG.resource: 2}),
    # v1beta1: the request's fields on the request itself.
    ([{"name": "r", "deviceClassName": "gpu.nvidia.com", "count": 4}], {GPU.resource: 4}),
    # A channel counts, though not as a GPU.
    ([_request(deviceClassName=CHANNEL.device_class)], {CHANNEL.resource: 1}),
    # A count no claim could be allocated is held to a bound, not summed as written.
    ([_request(deviceClassName="gpu.nvidia.com", count=10**400)], {GPU.resource: MAX_DEVICES}),
    ([_request(deviceClassName="gpu.nvidia.com", count=-3)], {GPU.resource: 1}),
])
def test_what_a_claim_asks_for(requests: list[dict[str, Any]], expected: dict[str, int]
                               ) -> None:
    asks = asks_of({"devices": {"requests": requests}})
    assert demand(asks, KINDS, lambda cls: 8 if cls == "gpu.nvidia.com" else 0) == expected


@pytest.mark.parametrize("spec", [None, "x", {"devices": None}, {"devices": {"requests": 3}},
                                  {"devices": {"requests": [None, {"exactly": "x"}]}}])
def test_what_is_not_a_claim_asks_for_nothing(spec: Any) -> None:
    assert asks_of(spec) == ()


def test_a_template_holds_its_claims_spec_one_level_deeper() -> None:
    template = claim_template("eight", "gpu.nvidia.com", 8)
    assert asks_of(claim_spec(template, template=True)) == (Ask((("gpu.nvidia.com", 8),)),)
    assert asks_of(claim_spec(template, template=False)) == ()


def test_a_pod_names_claims_and_templates() -> None:
    spec = {"resourceClaims": [{"name": "a", "resourceClaimTemplateName": "t"},
                               {"name": "b", "resourceClaimName": "c"},
                               {"name": "odd"}, "junk"]}
    assert named(spec) == [("ResourceClaimTemplate", "t"), ("ResourceClaim", "c")]
    assert named({}) == named(None) == []


def test_a_template_whose_claims_ask_for_gpus_joins_its_gang() -> None:
    asks = {("ResourceClaimTemplate", "gpus"): (Ask((("gpu.nvidia.com", 8),)),),
            ("ResourceClaimTemplate", "channel"): (Ask(((CHANNEL.device_class, 1),)),)}

    def template(name: str) -> dict[str, Any]:
        return {"spec": {"resourceClaims": [{"name": "c", "resourceClaimTemplateName": name}]}}

    assert claims_gpus(template("gpus"), lambda k, n: asks.get((k, n)), KINDS)
    assert not claims_gpus(template("channel"), lambda k, n: asks.get((k, n)), KINDS)
    assert not claims_gpus(template("unknown"), lambda k, n: asks.get((k, n)), KINDS)


def test_a_slice_offers_its_devices_by_the_first_kind_each_matches() -> None:
    gpus = dra_slice("n1", gpus=8)
    migs = dra_slice("n2", gpus=0, migs=7)
    assert counts(gpus, KINDS.values()) == {GPU.resource: 8}
    assert counts(migs, KINDS.values()) == {MIG.resource: 7}
    assert node_of(gpus) == "n1"
    assert pool_of(gpus) == ("gpu.nvidia.com", "n1", 1)
    # A driver the policy names for no class offers nothing.
    assert counts(dra_slice("n3", gpus=8, driver="gpu.example.com"), KINDS.values()) == {}


def test_attributes_are_read_from_v1_and_v1beta1_devices() -> None:
    v1 = dra_slice("n", gpus=1)
    device = v1["spec"]["devices"][0]
    v1beta1 = {**v1, "spec": {**v1["spec"], "devices": [
        {"name": device["name"], "basic": {"attributes": device["attributes"]}}]}}
    assert counts(v1beta1, KINDS.values()) == counts(v1, KINDS.values()) == {GPU.resource: 1}


def test_the_resource_of_a_class_is_its_own() -> None:
    assert resource_of("gpu.nvidia.com") == "dra.gpu-airlock.io/gpu.nvidia.com"
