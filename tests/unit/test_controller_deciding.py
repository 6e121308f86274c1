"""The controller's decisions, without a cluster: snapshot, fit, order, records."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    CLIQUE,
    NOW,
    admitted,
    cluster,
    gang,
    member,
    node,
    tracked,
    unit,
    waits,
)
from webhook.controller.core.deciding import Admit, DecideOptions, Finish, Record, Wait, decide
from webhook.controller.core.placement.reservation import Order
from webhook.conventions.base import SizeUnknown


def test_whole_gang_lands_in_one_domain() -> None:
    actions = decide(tracked(cluster({"a": 4, "b": 4}), gang("g", 4)), {}, NOW)
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    assert admit.record.domain in ("a", "b")
    assert {p.name for p in admit.ungate} == {"g-0", "g-1", "g-2", "g-3"}
    assert admit.anchor.name == "g-0"


def test_tightest_domain_wins() -> None:
    nodes = cluster({"big": 8, "small": 2})
    assert admitted(decide(tracked(nodes, gang("g", 2)), {}, NOW)) == {"g": "small"}


def test_gang_too_big_for_any_domain_waits_with_numbers() -> None:
    actions = decide(tracked(cluster({"a": 4, "b": 4}), gang("g", 8)), {}, NOW)
    assert not admitted(actions)
    assert waits(actions)["g"] == ("Waiting: 8/8 pods present; needs 64 GPUs in one "
                                   "nvidia.com/gpu.clique domain, more than the largest has "
                                   "(32); it cannot fit until the cluster grows")
    (wait,) = actions
    assert isinstance(wait, Wait)
    assert wait.warning


def test_gang_busy_domains_cannot_take_waits_with_numbers() -> None:
    busy = [member("busy", i, gated=False, node_name=f"a-n{i}") for i in range(2)]
    actions = decide(tracked(cluster({"a": 4, "b": 2}), busy + gang("g", 3)), {}, NOW)
    assert waits(actions)["g"] == ("Waiting: 3/3 pods present; needs 24 GPUs in one "
                                   "nvidia.com/gpu.clique domain, the best has 16 free")


@pytest.mark.parametrize("order", ["strict", "backfill"])
def test_a_gang_that_can_never_fit_keeps_no_room_from_those_behind(order: Order) -> None:
    """Bigger than any domain: were it the head, strict order would stop every gang behind
    it, and backfill would keep its best domain empty, for good."""
    pods = gang("huge", 8, created=1) + gang("small", 2, created=2)
    actions = decide(tracked(cluster({"a": 4}), pods), {}, NOW, DecideOptions(order=order))
    assert admitted(actions) == {"small": "a"}
    assert "cannot fit until the cluster grows" in waits(actions)["huge"]


def test_preferred_topology_may_span_domains() -> None:
    actions = decide(tracked(cluster({"a": 4, "b": 4}), gang("g", 8, mode="preferred")), {}, NOW)
    assert admitted(actions) == {"g": None}


def test_incomplete_gang_waits_then_warns() -> None:
    pods = gang("g", 4)[:3]
    early = decide(tracked(cluster({"a": 4}), pods), {}, pods[0].created + 10)
    assert waits(early) == {"g": "Waiting: 3/4 pods present; needs 32 GPUs in one "
                                 "nvidia.com/gpu.clique domain, the best has 32 free"}
    late = decide(tracked(cluster({"a": 4}), pods), {}, pods[0].created + 3600)
    (wait,) = [a for a in late if isinstance(a, Wait)]
    assert wait.warning
    assert wait.message.startswith("Incomplete: 3/4")


def test_size_from_the_owner_lookup_and_its_errors() -> None:
    pods = [member("job", i) for i in range(2)]
    assert admitted(decide(tracked(cluster({"a": 4}), pods),
                           {unit("job"): 2}, NOW)) == {"job": "a"}
    assert decide(tracked(cluster({"a": 4}), pods), {}, NOW) == []  # lookup under way
    unknown = SizeUnknown("PyTorchJob not installed")
    actions = decide(tracked(cluster({"a": 4}), pods), {unit("job"): unknown}, NOW)
    assert waits(actions)["job"] == "SizeUnknown: PyTorchJob not installed"


def test_higher_priority_gang_goes_first() -> None:
    low = gang("low", 4, priority=1, created=1)
    high = gang("high", 4, priority=100, created=2)
    actions = decide(tracked(cluster({"a": 4}), low + high), {}, NOW)
    assert admitted(actions) == {"high": "a"}
    assert "low" in waits(actions)


@pytest.mark.parametrize(("order", "small_goes"), [("strict", False), ("backfill", True)])
def test_head_of_queue_and_backfill(order: str, small_goes: bool) -> None:
    # The head needs a whole 4-node domain; one node of each domain is busy.
    nodes = cluster({"a": 4, "b": 4})
    busy = [member("busy", 0, node_name="a-n0", gated=False),
            member("busy", 1, node_name="b-n0", gated=False)]
    head = gang("head", 4, priority=10)
    small = gang("small", 1, priority=1)
    actions = decide(tracked(nodes, busy + head + small), {}, NOW, DecideOptions(order=order))  # type: ignore[arg-type]
    assert "head" in waits(actions)
    assert ("small" in admitted(actions)) == small_goes
    if small_goes:
        # Backfill keeps the head's best domain free for it.
        (admit,) = [a for a in actions if isinstance(a, Admit)]
        kept = "a"  # both have 24 free; ties break by name
        assert admit.record.domain != kept


def test_two_gangs_are_never_promised_the_same_gpus() -> None:
    pods = gang("g1", 4, created=1) + gang("g2", 4, created=2)
    actions = decide(tracked(cluster({"a": 4}), pods), {}, NOW)
    assert admitted(actions) == {"g1": "a"}


def test_ungated_unbound_pods_hold_their_capacity_until_timeout() -> None:
    record = Record("a", CLIQUE, ("first-0", "first-1", "first-2", "first-3"), NOW - 5)
    first = [member("first", i, size=4, gated=False, placement=record if i == 0
                    else None) for i in range(4)]
    second = gang("second", 4, created=5)
    assert "second" in waits(decide(tracked(cluster({"a": 4}), first + second), {}, NOW))
    later = NOW + 3600
    assert admitted(decide(tracked(cluster({"a": 4}), first + second),
                           {}, later)) == {"second": "a"}


def test_recorded_decision_is_finished_first_in_its_domain() -> None:
    members = ("g-0", "g-1", "g-2", "g-3")
    record = Record("b", CLIQUE, members, NOW - 1)
    pods = [member("g", i, size=4, gated=i >= 2, placement=record if i == 0 else None)
            for i in range(4)]
    rival = gang("rival", 4, priority=1000)
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods + rival), {}, NOW)
    (finish,) = [a for a in actions if isinstance(a, Finish)]
    assert finish.record.domain == "b"
    assert {p.name for p in finish.ungate} == {"g-2", "g-3"}
    # The rival gets the other domain, not the half-admitted gang's.
    assert admitted(actions) == {"rival": "a"}


def test_oversize_gang_admits_its_first_members_and_says_why() -> None:
    pods = [member("g", i, size=2, created=i) for i in range(3)]
    actions = decide(tracked(cluster({"a": 4}), pods), {}, NOW)
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    assert {p.name for p in admit.ungate} == {"g-0", "g-1"}
    (extra,) = [a for a in actions if isinstance(a, Wait)]
    assert extra.warning
    assert [p.name for p in extra.pods] == ["g-2"]


@pytest.mark.parametrize("bad", [
    {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]},
    {"unschedulable": True},
    {"ready": "False"},
])
def test_unusable_nodes_are_skipped(bad: dict[str, Any]) -> None:
    nodes = [node("a-n0", "a", **bad), node("a-n1", "a"), node("b-n0", "b"), node("b-n1", "b")]
    actions = decide(tracked(nodes, gang("g", 2)), {}, NOW)
    assert admitted(actions) == {"g": "b"}


def test_node_selector_and_affinity_are_honoured() -> None:
    nodes = cluster({"a": 2, "b": 2})
    pinned = gang("g", 2, nodeSelector={"kubernetes.io/hostname": "b-n1"}, mode="preferred")
    assert "g" in waits(decide(tracked(nodes, pinned), {}, NOW))  # two 8-GPU pods, one node
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": CLIQUE, "operator": "NotIn", "values": ["a"]}]}]}}}
    assert admitted(decide(tracked(nodes, gang("h", 2, affinity=affinity)), {}, NOW)) == {"h": "b"}


def test_members_disagreeing_on_the_size_wait_with_a_warning() -> None:
    pods = [member("g", 0, size=2), member("g", 1, size=3), member("g", 2, size=3)]
    (wait,) = decide(tracked(cluster({"a": 4}), pods), {}, NOW)
    assert isinstance(wait, Wait)
    assert wait.warning
    assert wait.message == ("SizeUnknown: members state different sizes (2, 3); "
                            "waiting until they agree")
