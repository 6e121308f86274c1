"""GPUs kept beside their NICs under one PCIe root: the webhook pairs a claim's GPUs with
its NICs (`webhook.devices.pairing`), and the controller counts a node's free pairs per
root, not its free GPUs and NICs apart (`webhook.devices.alignment`). And GPU models told
apart by what the GPUs' DRA devices say."""

from __future__ import annotations

from typing import Any

from tests.builders import (
    SEAL,
    allocated_claim,
    claim_template,
    gpu_nic_slices,
    gpus_and_nics,
    node,
    raw_member,
    shipped_policy,
)
from webhook.admission.aligning import align, as_admitted
from webhook.admission.reviews import Request
from webhook.controller.core.actions import Admit, Wait
from webhook.controller.core.cluster.claiming import DeviceIndex, claim_entry
from webhook.controller.core.deciding import decide
from webhook.controller.shells.cache import Cache
from webhook.devices.alignment import free_pairs, paired_devices
from webhook.devices.claims import asks_of, demand
from webhook.devices.kinds import PCIE_ROOT, aligned_class, resource_of
from webhook.devices.pairing import paired
from webhook.policy.gpumodels import GpuModel
from webhook.sandbox.devices import GPU_DRIVER, NIC_CLASS, NIC_DRIVER

KINDS = shipped_policy().device_kinds
PAIRS = resource_of(aligned_class(PCIE_ROOT, ("gpu.nvidia.com", NIC_CLASS)))
GPUS, NICS = resource_of("gpu.nvidia.com"), resource_of(NIC_CLASS)


def devices_of(node_name: str, driver: str, indexes: range) -> list[tuple[str, str, str]]:
    """The ids of a node's GPUs (or NICs) by index, as an allocation names them."""
    slices = gpu_nic_slices(node_name)
    found = next(s for s in slices if s["spec"]["driver"] == driver)["spec"]["devices"]
    return [(driver, node_name, found[i]["name"]) for i in indexes]


def test_a_node_has_free_pairs_only_where_a_root_has_both_a_gpu_and_a_nic_free() -> None:
    devices = [d for s in gpu_nic_slices("n0") for d in paired_devices(s, KINDS.values())]
    assert free_pairs(devices, set(), KINDS.values()) == {PAIRS: 8}
    # GPUs taken under the first two roots, NICs under the last two: 4 GPUs and 4 NICs
    # are free, but no GPU has a NIC beside it.
    taken = {*devices_of("n0", GPU_DRIVER, range(4)), *devices_of("n0", NIC_DRIVER, range(4, 8))}
    assert free_pairs(devices, taken, KINDS.values()) == {}
    # One GPU and one NIC freed under the same root: one pair.
    taken -= {devices_of("n0", GPU_DRIVER, range(4))[0], devices_of("n0", NIC_DRIVER, range(1))[0]}
    assert free_pairs(devices, taken, KINDS.values()) == {PAIRS: 1}


def test_the_webhook_splits_gpus_and_nics_into_pairs_each_under_one_root() -> None:
    spec = gpus_and_nics("t", 4, aligned=False)["spec"]["spec"]
    spec["devices"]["config"] = [{"requests": ["nic"], "opaque": {"driver": NIC_DRIVER,
                                                                  "parameters": {}}}]
    devices, warnings = paired(spec, KINDS.values())
    assert devices is not None
    assert [r["name"] for r in devices["requests"]] == [
        "gpu-0", "gpu-1", "gpu-2", "gpu-3", "nic-0", "nic-1", "nic-2", "nic-3"]
    assert all(r["exactly"]["count"] == 1 for r in devices["requests"])
    assert devices["constraints"] == [
        {"requests": [f"gpu-{i}", f"nic-{i}"], "matchAttribute": PCIE_ROOT} for i in range(4)]
    assert devices["config"][0]["requests"] == ["nic-0", "nic-1", "nic-2", "nic-3"]
    assert "split into 4 pairs" in warnings[0]
    # What the controller counts for the claim: 4 GPUs, 4 NICs and 4 pairs.
    assert demand(asks_of({"devices": devices}), KINDS, lambda _: 0) == {
        GPUS: 4, NICS: 4, PAIRS: 4}


def test_one_gpu_and_one_nic_keep_their_names_and_get_the_constraint() -> None:
    devices, warnings = paired(gpus_and_nics("t", 1, aligned=False)["spec"]["spec"],
                               KINDS.values())
    assert devices is not None
    assert not warnings
    assert [r["name"] for r in devices["requests"]] == ["gpu", "nic"]
    assert devices["constraints"] == [{"requests": ["gpu", "nic"], "matchAttribute": PCIE_ROOT}]


def test_claims_the_webhook_cannot_pair_are_left_alone() -> None:
    uneven = gpus_and_nics("t", 4, aligned=False)["spec"]["spec"]
    uneven["devices"]["requests"][1]["exactly"]["count"] = 2
    devices, warnings = paired(uneven, KINDS.values())
    assert devices is None
    assert "not aligned by pcieRoot" in warnings[0]
    # The user's own constraint stands.
    own = gpus_and_nics("t", 2, aligned=False)["spec"]["spec"]
    own["devices"]["constraints"] = [{"matchAttribute": PCIE_ROOT}]
    assert paired(own, KINDS.values()) == (None, [])
    # GPUs alone: nothing to pair.
    assert paired(claim_template("g")["spec"]["spec"], KINDS.values()) == (None, [])


def _review(obj: dict[str, Any], operation: str = "CREATE") -> Request:
    return Request("uid", operation, "ml", "someone", obj, None)  # type: ignore[arg-type]


def test_the_claims_endpoint_patches_a_template_and_passes_the_rest() -> None:
    response = align(_review(gpus_and_nics("t", 2, aligned=False)), shipped_policy())
    assert response.allowed
    assert [op["path"] for op in response.patch] == ["/spec/spec/devices"]
    assert len(response.patch[0]["value"]["constraints"]) == 2
    claim = {**gpus_and_nics("t", 2, aligned=False), "kind": "ResourceClaim"}
    claim["spec"] = claim["spec"]["spec"]
    assert align(_review(claim), shipped_policy()).patch[0]["path"] == "/spec/devices"
    assert not align(_review(claim_template("g")), shipped_policy()).patch


def _index_with_node() -> DeviceIndex:
    index = DeviceIndex(KINDS)
    index.list_slices([index.slice_entry(s) for s in gpu_nic_slices("n0")])
    return index


def test_claims_that_keep_no_pairs_take_pairs_away_and_aligned_ones_are_charged_to_pods(
        ) -> None:
    index = _index_with_node()
    assert index.supply["n0"] == {GPUS: 8, NICS: 8, PAIRS: 8}
    unaligned = allocated_claim("scattered", [*devices_of("n0", GPU_DRIVER, range(4)),
                                              *devices_of("n0", NIC_DRIVER, range(4, 8))])
    index.put_claim(claim_entry("ResourceClaim", unaligned))
    assert index.take_touched() == {"n0"}
    assert PAIRS not in index.supply["n0"]
    # An aligned claim's pairs stay in what the node offers: its pod's requests hold them.
    index.drop_claim(claim_entry("ResourceClaim", unaligned))
    aligned = allocated_claim("pairs", [*devices_of("n0", GPU_DRIVER, range(2)),
                                        *devices_of("n0", NIC_DRIVER, range(2))],
                              template=gpus_and_nics("t", 2))
    index.put_claim(claim_entry("ResourceClaim", aligned))
    index.take_touched()
    assert index.supply["n0"][PAIRS] == 8


def _claiming(raw: dict[str, Any], template: str) -> dict[str, Any]:
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1"}}
    raw["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": template}]
    return raw


def test_a_gang_of_aligned_pods_waits_where_only_unaligned_devices_are_free() -> None:
    policy = shipped_policy()
    cache = Cache(policy.counted(), SEAL, policy.device_kinds)
    cache.list_nodes([node("n0", "a", gpus=0)])
    cache.list_slices([cache.parse_slice(s) for s in gpu_nic_slices("n0")])
    cache.claim_event("ResourceClaimTemplate")("ADDED", gpus_and_nics("four", 4))
    # Another workload's claim holds the GPUs of two roots and the NICs of the other two.
    cache.claim_event("ResourceClaim")("ADDED", allocated_claim(
        "other", [*devices_of("n0", GPU_DRIVER, range(4)),
                  *devices_of("n0", NIC_DRIVER, range(4, 8))]))
    cache.list_pods([cache.parse_pod(_claiming(raw_member("g", 0, gpus=0, size=1), "four"))])
    actions = decide(cache.cluster, {}, 0.0)
    assert not any(isinstance(a, Admit) for a in actions)
    assert any(isinstance(a, Wait) for a in actions)
    # The other claim's devices free: four pairs are free, and the pod is admitted.
    cache.claim_event("ResourceClaim")("DELETED", allocated_claim("other", []))
    assert [a for a in decide(cache.cluster, {}, 0.0) if isinstance(a, Admit)]


def test_a_node_is_of_the_model_its_gpus_dra_attributes_name() -> None:
    """`gpuModels[].deviceAttributes`: nodes that carry no model label are told apart by
    what their GPUs' slices say (`productName`, NVIDIA's DRA driver's)."""
    policy = shipped_policy()
    models = (GpuModel.model_validate({"name": "h100", "deviceAttributes": {
                  "productName": "NVIDIA H100 80GB HBM3"}}),
              GpuModel.model_validate({"name": "a100", "deviceAttributes": {
                  "gpu.nvidia.com/productName": "NVIDIA A100 SXM4 80GB"}}))
    cache = Cache(policy.counted(), SEAL, policy.device_kinds)
    assert cache.count_devices_as(policy.device_kinds, models)
    cache.list_nodes([node("h-0", "a", gpus=0), node("a-0", "b", gpus=0),
                      node("bare", "b", gpus=0)])
    cache.cluster.sort_models(models)
    cache.list_slices([cache.parse_slice(s) for s in (
        *gpu_nic_slices("h-0"), *gpu_nic_slices("a-0", 4, "NVIDIA-A100-SXM4-80GB"))])
    assert cache.cluster.models.of_node == {"h-0": "h100", "a-0": "a100"}
    assert cache.cluster.models.total == {"h100": 8, "a100": 4}


def test_explain_reads_a_template_as_the_webhook_would_store_it() -> None:
    written = gpus_and_nics("t", 2, aligned=False)
    admitted = as_admitted(written, shipped_policy())
    assert admitted["spec"]["spec"]["devices"] == gpus_and_nics("t", 2)["spec"]["spec"]["devices"]
    assert written == gpus_and_nics("t", 2, aligned=False)  # the file's object, unchanged
    assert as_admitted(claim_template("g"), shipped_policy()) == claim_template("g")
