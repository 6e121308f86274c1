"""Team queues in the pure core: quotas (nominal, borrowing, lending), time-based fair
share, and the admission order they give."""

from __future__ import annotations

import math

import pytest

from tests.builders import NOW, admitted, cluster, gang, running, tracked, waits
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.fairshare import FairShare
from webhook.controller.core.queues.quotas import DEFAULT_QUEUE, QueueSpec, Quotas

DAY = 86400.0
OFF = PreemptionSettings(enabled=False)
TEAMS = Quotas([QueueSpec("team-a", ("team-a", "team-a-*"), nominal=16),
                QueueSpec("team-b", ("team-b",), nominal=16, weight=2)])


@pytest.mark.parametrize(("namespace", "queue"), [
    ("team-a", "team-a"), ("team-a-dev", "team-a"), ("team-b", "team-b"),
    ("team-bee", DEFAULT_QUEUE), ("kube-public", DEFAULT_QUEUE)])
def test_namespaces_map_to_queues(namespace: str, queue: str) -> None:
    assert TEAMS.queue_of(namespace) == queue


def test_a_team_with_less_recent_usage_goes_first() -> None:
    # Room for one of two same-priority gangs; team-a's arrived first, but team-b used
    # less lately (per weight), so team-b goes.
    first = gang("first", 2, ns="team-a", created=1)
    second = gang("second", 2, ns="team-b", created=2)
    usage = FairShare(DAY, 600, NOW, {"team-a": 1000.0, "team-b": 1500.0})
    state = QueueState(TEAMS, fair_share=usage)
    assert admitted(decide(tracked(cluster({"x": 2}), first + second), {}, NOW, state=state)) == \
        {"second": "x"}
    # Without fair share, arrival decides.
    assert admitted(decide(tracked(cluster({"x": 2}), first + second), {}, NOW,
                           state=QueueState(TEAMS))) == {"first": "x"}


def test_priority_still_comes_before_fair_share() -> None:
    urgent = gang("urgent", 2, ns="team-a", priority=10)
    cheap = gang("cheap", 2, ns="team-b")
    usage = FairShare(DAY, 600, NOW, {"team-a": 1e9})
    state = QueueState(TEAMS, fair_share=usage)
    assert admitted(decide(tracked(cluster({"x": 2}), urgent + cheap), {}, NOW, state=state)) == \
        {"urgent": "x"}


def test_the_entry_charge_counts_within_the_round() -> None:
    # team-a starts lower, but its first admission's charge puts it above team-b.
    gangs = gang("a1", 1, ns="team-a", created=1) + gang("a2", 1, ns="team-a", created=2)
    gangs += gang("b1", 1, ns="team-b", created=3)
    usage = FairShare(DAY, 600, NOW, {"team-a": 0.0, "team-b": 1000.0})
    state = QueueState(TEAMS, fair_share=usage)
    actions = decide(tracked(cluster({"x": 2}, gpus=8), gangs), {}, NOW, state=state)
    # 8 x 600 GPU-seconds for a1 > team-b's 1000 / 2: b1 goes second, a2 waits.
    assert set(admitted(actions)) == {"a1", "b1"}


def test_usage_decays_with_the_half_life() -> None:
    share = FairShare(DAY, 600, NOW, {"team-a": 1000.0})
    assert share.advance(NOW + DAY, {}).usage["team-a"] == pytest.approx(500.0)
    held = share.advance(NOW + DAY, {"team-b": 4})
    # Holder 4 GPUs for one half-life from nothing: 4 x h / ln 2 x (1 - 1/2).
    assert held.usage["team-b"] == pytest.approx(4 * DAY / math.log(2) / 2)
    # Constant use converges to GPUs x h / ln 2.
    far = FairShare(DAY, 600, NOW).advance(NOW + 100 * DAY, {"team-a": 8})
    assert far.usage["team-a"] == pytest.approx(8 * DAY / math.log(2))


def test_a_half_life_of_zero_counts_only_the_present() -> None:
    share = FairShare(0, 600, NOW, {"team-a": 1e9}).advance(NOW + 10, {"team-b": 8})
    assert dict(share.usage) == {"team-b": 8.0}
    assert share.charge("team-a", 4).usage["team-a"] == 4.0


def test_share_divides_by_weight() -> None:
    share = FairShare(DAY, 600, NOW, {"team-a": 100.0, "team-b": 100.0})
    assert share.share("team-a", 1) == 100.0
    assert share.share("team-b", 2) == 50.0


def test_a_queue_within_nominal_is_admitted_and_beyond_it_borrows() -> None:
    # team-a uses 16 of its 16; another 8 borrow from team-b's idle nominal.
    quotas = Quotas([QueueSpec("team-a", ("team-a",), nominal=16),
                     QueueSpec("team-b", ("team-b",), nominal=16)])
    busy = running("held", ["x-n0", "x-n1"], ns="team-a")
    more = gang("more", 1, ns="team-a")
    assert admitted(decide(tracked(cluster({"x": 4}), busy + more), {}, NOW,
                           state=QueueState(quotas))) == {"more": "x"}


def test_the_borrowing_limit_caps_a_queue() -> None:
    quotas = Quotas([QueueSpec("team-a", ("team-a",), nominal=16, borrowing_limit=0),
                     QueueSpec("team-b", ("team-b",), nominal=16)])
    busy = running("held", ["x-n0", "x-n1"], ns="team-a")
    more = gang("more", 1, ns="team-a", created=1)
    other = gang("other", 1, ns="team-b", created=2)
    actions = decide(tracked(cluster({"x": 4}), busy + more + other), {}, NOW,
                     state=QueueState(quotas, OFF))
    assert waits(actions)["more"] == ("Waiting: 1/1 pods present; queue team-a would use 24 "
                                      "GPUs: nominal 16, borrowing limit 0")
    # A gang over its quota keeps nothing back: the other queue's gang goes.
    assert admitted(actions) == {"other": "x"}


def test_the_lending_limit_protects_idle_nominal() -> None:
    # team-b lends only 8 of its 16: team-a, at its nominal, may borrow 8, not 16.
    quotas = Quotas([QueueSpec("team-a", ("team-a",), nominal=16),
                     QueueSpec("team-b", ("team-b",), nominal=16, lending_limit=8)])
    busy = running("held", ["x-n0", "x-n1"], ns="team-a")
    state = QueueState(quotas, OFF)
    big = gang("big", 2, ns="team-a")
    actions = decide(tracked(cluster({"x": 4}), busy + big), {}, NOW, state=state)
    assert "would borrow 16 GPUs" in waits(actions)["big"]
    small = gang("small", 1, ns="team-a")
    assert admitted(decide(tracked(cluster({"x": 4}), busy + small), {}, NOW, state=state)) == \
        {"small": "x"}


def test_without_queues_everything_shares_the_default_queue() -> None:
    # No guarantee, no limit: only the physical fit decides, as before queues.
    actions = decide(tracked(cluster({"x": 2}), gang("g", 2, ns="anywhere")), {}, NOW,
                     state=QueueState())
    assert admitted(actions) == {"g": "x"}


def test_a_new_leader_carries_on_from_the_usage_kept() -> None:
    kept = FairShare(DAY, 600, NOW, {"team-a": 1234.5})
    fresh = FairShare(DAY / 2, 60, NOW + 30)
    carried = fresh.carried_on(kept.dumps())
    # The usage and its time come from the former leader, the settings from the policy.
    assert (carried.at, dict(carried.usage)) == (NOW, {"team-a": 1234.5})
    assert (carried.half_life, carried.entry_seconds) == (DAY / 2, 60)
    assert fresh.carried_on("not json") is fresh
    assert fresh.carried_on('{"at": 1}') is fresh
