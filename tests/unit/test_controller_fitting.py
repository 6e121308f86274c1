"""The snapshot's free capacity and the pure fit: whole gangs, one domain, tightest first,
bin-packed, never onto capacity another gang holds."""

from __future__ import annotations

from tests.builders import CLIQUE, cluster, gang, member, node, snapshot
from webhook.controller.core.placement.fitting import NoFit, fit
from webhook.controller.core.placement.packing import Plan, take_plan
from webhook.controller.core.pods import PodInfo


def plan_of(outcome: Plan | NoFit) -> Plan:
    assert isinstance(outcome, Plan), outcome
    return outcome


def per_node(plan: Plan, pods: list[PodInfo]) -> dict[str, int]:
    gpus = {p.key: p.requests["nvidia.com/gpu"] for p in pods}
    used: dict[str, int] = {}
    for key, n in plan.assignments.items():
        used[n] = used.get(n, 0) + gpus[key]
    return used


def test_free_is_allocatable_minus_active_bound_pods() -> None:
    bound = member("other", 0, gpus=3, gated=False, node_name="a-n0")
    done = PodInfo.parse({"metadata": {"name": "done", "namespace": "ml"},
                          "spec": {"nodeName": "a-n1", "containers": [{"name": "c", "resources": {
                              "requests": {"nvidia.com/gpu": "8"}}}]},
                          "status": {"phase": "Succeeded"}})
    unbound = member("waiting", 0, gpus=8)
    snap = snapshot(cluster({"a": 2}), [bound, done, unbound])
    assert snap.free_gpu == {"a-n0": 5, "a-n1": 8}
    assert snap.free["a-n0"]["pods"] == 109
    assert snap.free["a-n0"]["cpu"] == 88_000


def test_mixed_sizes_are_bin_packed_largest_first() -> None:
    pods = [member("g", i, gpus=g, size=4) for i, g in enumerate((2, 6, 2, 6))]
    plan = plan_of(fit(pods, snapshot(cluster({"a": 2}), []), CLIQUE, "required"))
    assert sorted(per_node(plan, pods).values()) == [8, 8]


def test_pods_fill_the_fullest_node_first_so_whole_nodes_stay_free() -> None:
    busy = member("busy", 0, gpus=4, gated=False, node_name="a-n1")
    pods = [member("g", 0, gpus=4, size=1)]
    plan = plan_of(fit(pods, snapshot(cluster({"a": 3}), [busy]), CLIQUE, "required"))
    assert plan.assignments == {("ml", "g-0"): "a-n1"}


def test_tightest_domain_is_chosen_and_big_holes_stay_free() -> None:
    nodes = cluster({"big": 4, "mid": 2, "tiny": 1})
    plan = plan_of(fit(gang("g", 2), snapshot(nodes, []), CLIQUE, "required"))
    assert plan.domain == "mid"


def test_gpus_alone_are_not_enough_cpu_must_fit_too() -> None:
    hungry = [member("g", i, gpus=1, size=2,
                     containers=[{"name": "c", "resources": {"requests": {
                         "nvidia.com/gpu": "1", "cpu": "90"}}}]) for i in range(2)]
    outcome = fit(hungry, snapshot(cluster({"a": 1, "b": 2}), []), CLIQUE, "required")
    assert plan_of(outcome).domain == "b"


def test_an_extended_resource_the_node_lacks_does_not_fit() -> None:
    pods = [member("g", 0, size=1, containers=[{"name": "c", "resources": {
        "limits": {"example.com/fpga": "1"}}}])]
    outcome = fit(pods, snapshot(cluster({"a": 1}), []), CLIQUE, "required")
    assert isinstance(outcome, NoFit)


def test_required_topology_never_spans_preferred_does() -> None:
    busy = [member("busy", i, size=2, gated=False, node_name=n)
            for i, n in enumerate(("a-n2", "b-n2"))]
    snap = snapshot(cluster({"a": 3, "b": 3}), busy)
    required = fit(gang("g", 3), snap, CLIQUE, "required")
    assert isinstance(required, NoFit)
    assert required.reason == "needs 24 GPUs in one topology domain, the best has 16 free"
    assert set(required.best_domain_nodes) == {"a-n0", "a-n1", "a-n2"}  # ties: by name
    spanning = plan_of(fit(gang("g", 3, mode="preferred"), snap, CLIQUE, "preferred"))
    assert spanning.domain is None
    assert len(spanning.assignments) == 3


def test_preferred_takes_one_domain_when_one_fits() -> None:
    snap = snapshot(cluster({"a": 2, "b": 4}), [])
    assert plan_of(fit(gang("g", 2, mode="preferred"), snap, CLIQUE, "preferred")).domain == "a"


def test_nodes_kept_for_another_gang_are_avoided() -> None:
    snap = snapshot(cluster({"a": 2, "b": 2}), [])
    kept = {"a-n0", "a-n1"}
    assert plan_of(fit(gang("g", 2), snap, CLIQUE, "required", avoid=kept)).domain == "b"
    assert isinstance(fit(gang("g", 2), snap, None, None, avoid=kept | {"b-n0"}), NoFit)


def test_reserve_takes_capacity_so_a_second_gang_cannot_have_it() -> None:
    snap = snapshot(cluster({"a": 2}), [])
    first = gang("first", 2)
    take_plan(plan_of(fit(first, snap, CLIQUE, "required")), first, snap)
    assert snap.free_gpus(["a-n0", "a-n1"]) == 0
    assert isinstance(fit(gang("second", 1), snap, CLIQUE, "required"), NoFit)


def test_no_fit_reasons_name_what_is_missing() -> None:
    unlabelled = snapshot([node("n0", None)], [])
    outcome = fit(gang("g", 1), unlabelled, CLIQUE, "required", level=CLIQUE)
    assert isinstance(outcome, NoFit)
    assert "no eligible node has the label" in outcome.reason
    cordoned = snapshot([node("n0", "a", unschedulable=True)], [])
    outcome = fit(gang("g", 1), cordoned, CLIQUE, "required")
    assert isinstance(outcome, NoFit)
    assert "no node is eligible" in outcome.reason


def test_no_topology_packs_anywhere() -> None:
    pods = [member("g", i, gpus=4, size=4) for i in range(4)]
    plan = plan_of(fit(pods, snapshot(cluster({"a": 1, "b": 1}), []), None, None))
    assert plan.domain is None
    assert sorted(per_node(plan, pods).values()) == [8, 8]
