"""The controller counts GPUs claimed through DRA as it counts extended resources: what a
pod's claims ask for joins its requests, what a node's ResourceSlices offer joins its
allocatable, and a round fits, gates and waits on them alike. Claims, templates and slices
may arrive in any order."""

from __future__ import annotations

from typing import Any

from tests.builders import (
    SEAL,
    claim_template,
    dra_slice,
    node,
    raw_member,
    resource_claim,
    shipped_policy,
)
from webhook.controller.core.actions import Admit, Wait
from webhook.controller.core.cluster.claiming import DeviceIndex, claim_entry
from webhook.controller.core.deciding import decide
from webhook.controller.core.identities import PodKey
from webhook.controller.shells.cache import Cache
from webhook.devices.kinds import resource_of

DRA_GPU = resource_of("gpu.nvidia.com")


def claims(raw: dict[str, Any], template: str | None = None, claim: str | None = None
           ) -> dict[str, Any]:
    """A member that asks for its GPUs through a claim instead of nvidia.com/gpu."""
    container = raw["spec"]["containers"][0]
    for section in ("requests", "limits"):
        container["resources"][section].pop("nvidia.com/gpu", None)
    entry = {"name": "gpus", "resourceClaimTemplateName": template} if template else \
        {"name": "gpus", "resourceClaimName": claim}
    raw["spec"]["resourceClaims"] = [entry]
    return raw


def dra_cache(domains: dict[str, int]) -> Cache:
    """Nodes whose 8 GPUs each are DRA devices only, in NVLink domains."""
    policy = shipped_policy()
    cache = Cache(policy.counted(), SEAL, policy.device_kinds)
    nodes = [node(f"{d}-n{i}", d, gpus=0) for d, n in domains.items() for i in range(n)]
    cache.list_nodes(nodes)
    cache.list_slices([cache.parse_slice(dra_slice(n.name)) for n in nodes])
    return cache


def test_a_pod_counts_what_its_template_asks_once_the_template_is_seen() -> None:
    index = DeviceIndex(shipped_policy().device_kinds)
    key = PodKey("ml", "g-0")
    index.pod_put(key, claims(raw_member("g", 0), template="eight"))
    assert index.claimed(key) == {}
    eight = claim_entry("ResourceClaimTemplate", claim_template("eight"))
    assert index.put_claim(eight) == {key}
    assert index.claimed(key) == {DRA_GPU: 8}
    assert index.drop_claim(eight) == {key}
    assert index.claimed(key) == {}


def test_a_claim_several_pods_share_counts_once_on_the_first_by_name() -> None:
    index = DeviceIndex(shipped_policy().device_kinds)
    index.put_claim(claim_entry("ResourceClaim", resource_claim("shared", count=4)))
    a, b = PodKey("ml", "a"), PodKey("ml", "b")
    assert index.pod_put(b, claims(raw_member("g", 1, name="b"), claim="shared")) == set()
    assert index.pod_put(a, claims(raw_member("g", 0, name="a"), claim="shared")) == {b}
    assert (index.claimed(a), index.claimed(b)) == ({DRA_GPU: 4}, {})
    assert index.pod_dropped(a) == {b}
    assert index.claimed(b) == {DRA_GPU: 4}


def test_a_node_offers_its_pools_at_their_newest_generation() -> None:
    index = DeviceIndex(shipped_policy().device_kinds)
    first = index.slice_entry(dra_slice("n1", gpus=8, generation=1))
    second = index.slice_entry(dra_slice("n1", gpus=4, generation=2))
    assert index.put_slice(first) == "n1"
    assert index.supply["n1"] == {DRA_GPU: 8}
    # The driver republishes the pool: while both generations exist, the newer counts.
    assert index.put_slice(second) == "n1"
    assert index.supply["n1"] == {DRA_GPU: 4}
    assert index.drop_slice(second) == "n1"
    assert index.supply["n1"] == {DRA_GPU: 8}
    assert index.drop_slice(first) == "n1"
    assert "n1" not in index.supply
    assert index.list_slices([index.slice_entry(dra_slice("n2"))]) == {"n2"}


def test_all_counts_the_most_any_node_offers() -> None:
    index = DeviceIndex(shipped_policy().device_kinds)
    index.list_slices([index.slice_entry(dra_slice("n1", gpus=4)),
                       index.slice_entry(dra_slice("n2", gpus=8))])
    index.put_claim(claim_entry("ResourceClaimTemplate", claim_template("every", mode="All")))
    key = PodKey("ml", "g-0")
    index.pod_put(key, claims(raw_member("g", 0), template="every"))
    assert index.claimed(key) == {DRA_GPU: 8}


def test_a_dra_gang_is_admitted_whole_into_one_domain() -> None:
    cache = dra_cache({"a": 1, "b": 2})
    cache.claim_event("ResourceClaimTemplate")("ADDED", claim_template("eight"))
    cache.list_pods([cache.parse_pod(claims(raw_member("g", i, size=2), template="eight"))
                     for i in range(2)])
    actions = decide(cache.cluster, {}, 0.0)
    admits = [a for a in actions if isinstance(a, Admit)]
    assert len(admits) == 1
    assert admits[0].record.domain == "b"
    assert admits[0].gpus == 16


def test_a_dra_gang_waits_whole_until_its_template_and_its_room_exist() -> None:
    cache = dra_cache({"a": 2})
    cache.list_pods([cache.parse_pod(claims(raw_member("g", i, size=3), template="eight"))
                     for i in range(3)])
    # Before their template is seen, the members' claims count nothing.
    assert all(DRA_GPU not in p.requests for p in cache.pods.values())
    cache.claim_event("ResourceClaimTemplate")("ADDED", claim_template("eight"))
    assert all(p.requests.get(DRA_GPU) == 8 for p in cache.pods.values())
    actions = decide(cache.cluster, {}, 0.0)
    assert not any(isinstance(a, Admit) for a in actions)
    assert {a.reason for a in actions if isinstance(a, Wait)} == {"NeverFits"}
    # A third node's slice arrives: now the gang fits whole.
    extra = node("a-n2", "a", gpus=0)
    cache.node_event("ADDED", {"metadata": {"name": extra.name, "labels": dict(extra.labels)},
                               "spec": {}, "status": {
                                   "allocatable": {"cpu": "96", "memory": "1Ti", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True"}]}})
    cache.slice_event("ADDED", dra_slice("a-n2"))
    assert [a for a in decide(cache.cluster, {}, 0.0) if isinstance(a, Admit)]


def test_a_relist_forgets_the_claims_of_pods_gone_meanwhile() -> None:
    cache = dra_cache({"a": 1})
    cache.claim_event("ResourceClaim")("ADDED", resource_claim("shared", count=4))
    first, second = (claims(raw_member("g", i, name=n), claim="shared")
                     for i, n in enumerate(("a", "b")))
    cache.list_pods([cache.parse_pod(first), cache.parse_pod(second)])
    assert cache.pods[PodKey("ml", "b")].requests.get(DRA_GPU) is None
    # The watch expired; `a` was deleted before the relist: `b` now counts the claim.
    cache.list_pods([cache.parse_pod(claims(raw_member("g", 1, name="b"), claim="shared"))])
    assert cache.pods[PodKey("ml", "b")].requests[DRA_GPU] == 4
