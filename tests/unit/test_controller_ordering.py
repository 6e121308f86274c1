"""Which gang goes first: priority, then arrival; strict order, or backfill that keeps
the head's domain for it."""

from __future__ import annotations

from tests.builders import NOW, admitted, cluster, gang, member, tracked, waits
from webhook.controller.core.deciding import DecideOptions, decide


def busy(*nodes: str) -> list:  # type: ignore[type-arg]
    return [member("busy", i, gated=False, node_name=n) for i, n in enumerate(nodes)]


def test_same_priority_goes_by_arrival() -> None:
    later = gang("later", 4, created=9)
    earlier = gang("earlier", 4, created=1)
    assert admitted(decide(tracked(cluster({"a": 4}), later + earlier),
                           {}, NOW)) == {"earlier": "a"}


def test_strict_head_blocks_gangs_that_would_fit_elsewhere() -> None:
    nodes = cluster({"a": 4, "b": 4})
    pods = busy("a-n0", "b-n0") + gang("head", 4, priority=10) + gang("small", 1)
    actions = decide(tracked(nodes, pods), {}, NOW, DecideOptions(order="strict"))
    assert not admitted(actions)
    assert waits(actions)["small"] == "Waiting: behind gang ml/head, first in the queue"


def test_backfill_never_uses_the_heads_kept_domain() -> None:
    # Only domain a has room for the small gang, and a is the head's best domain.
    nodes = cluster({"a": 4, "b": 4})
    pods = busy("a-n0", "b-n0", "b-n1", "b-n2", "b-n3") + gang("head", 4, priority=10)
    pods += gang("small", 1)
    actions = decide(tracked(nodes, pods), {}, NOW, DecideOptions(order="backfill"))
    assert not admitted(actions)
    assert waits(actions)["small"].startswith("Waiting: 1/1 pods present; needs 8 GPUs")


def test_only_the_first_blocked_gang_keeps_capacity() -> None:
    nodes = cluster({"a": 4, "b": 4, "c": 2})
    pods = busy("a-n0", "b-n0") + gang("head", 4, priority=10, created=1)
    pods += gang("second", 4, priority=10, created=2) + gang("small", 2, created=3)
    actions = decide(tracked(nodes, pods), {}, NOW, DecideOptions(order="backfill"))
    # head keeps a (ties go by name); second kept nothing; small takes c, the tightest.
    assert admitted(actions) == {"small": "c"}


def test_an_incomplete_gang_is_never_the_head() -> None:
    nodes = cluster({"a": 4})
    pods = gang("big", 4, priority=10)[:3] + gang("small", 2)
    actions = decide(tracked(nodes, pods), {}, NOW, DecideOptions(order="strict"))
    assert admitted(actions) == {"small": "a"}
    assert ": 3/4 pods present" in waits(actions)["big"]
