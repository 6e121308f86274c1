"""Targeted defragmentation, decided in the pure core: the head of the queue would fit in
the free GPUs but in no domain; a few movable pods go out of one domain, which is then
held for it; never a protected class, a pod nobody makes again, or past the budget."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    NOW,
    SCAVENGER,
    TRAINING,
    cluster,
    gang,
    make_policy,
    member,
    preempts,
    running,
    single,
    tracked,
    waits,
)
from webhook.controller.core.actions import events_of
from webhook.controller.core.configuring import preemption_of
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.policy.queues import PreemptionSpec

MOVES = PreemptionSettings(enabled=False, moves_per_hour=10)
PROTECTS_INFERENCE = PreemptionSettings(
    enabled=False, moves_per_hour=10,
    protected_priority_classes=frozenset({"airlock-inference"}))


def _replica(name: str, node: str, gpus: int = 4, **kw: Any) -> PodInfo:
    """A Deployment's replica Airlock queued, running on `node` for an hour."""
    return single(name, node, gpus, queued=True, owner="ReplicaSet", priority=SCAVENGER, **kw)


def _blocked(node: str, gpus: int = 4) -> list[PodInfo]:
    """GPUs held on `node` by a running gang's member: nothing moves it."""
    return [member("fixed", 0, gpus, size=1, gated=False, node_name=node)]


def _decide(busy: list[PodInfo], settings: PreemptionSettings = MOVES,
            moves_left: int = 10) -> list[object]:
    """Domains a and b of two 8-GPU nodes each; 12 GPUs free in each; a training gang
    of 2 x 8 GPUs that needs one domain: 24 free, none in one domain."""
    train = gang("train", 2, priority=TRAINING)
    state = QueueState(preemption=settings, moves_left=moves_left)
    return list(decide(tracked(cluster({"a": 2, "b": 2}), busy + train), {}, NOW, state=state))


def test_a_replica_is_moved_out_of_one_domain_for_the_head() -> None:
    actions = _decide([_replica("web", "a-n0"), *_blocked("b-n0")])
    (move,) = preempts(actions)
    assert move.record.domain == "a"
    assert [(v.unit.name, v.cause) for v in move.victims] == [("web", "move")]
    told = {e.reason: e.message for e in events_of(move)}
    assert "moved: the first in the queue" in told["Preempted"]
    assert "moving 4 GPUs out of nvidia.com/gpu.clique domain a frees it whole" in \
        told["Preempting"]


def test_the_domain_that_moves_least_is_chosen() -> None:
    # b frees whole by moving 6 GPUs, a by moving 4.
    busy = [_replica("big", "b-n0", 6), _replica("small", "a-n0", 4)]
    (move,) = preempts(_decide(busy))
    assert (move.record.domain, [v.unit.name for v in move.victims]) == ("a", ["small"])


@pytest.mark.parametrize(("busy", "settings", "left", "why"), [
    # Off by default.
    ([_replica("web", "a-n0"), *_blocked("b-n0")], PreemptionSettings(enabled=False), 10,
     "off"),
    # The hour's budget is spent.
    ([_replica("web", "a-n0"), *_blocked("b-n0")], MOVES, 0, "budget"),
    # A protected class, told by its PriorityClass.
    ([_replica("web", "a-n0", priority_class="airlock-inference"), *_blocked("b-n0")],
     PROTECTS_INFERENCE, 10, "protected"),
    # A pod nobody makes again (no owner) would be lost, not moved.
    ([single("bare", "a-n0", 4, queued=True), *_blocked("b-n0")], MOVES, 10, "no owner"),
    # Too little gain: 12 GPUs moved for 16 at a share of 0.5 (18 free in all).
    ([_replica("w1", "a-n0", 6), _replica("w2", "a-n1", 6), *_blocked("b-n0", 2)], MOVES,
     10, "gain"),
    # Young: inside its minimum runtime.
    ([_replica("web", "a-n0", ran=60), *_blocked("b-n0")], MOVES, 10, "young"),
])
def test_nothing_moves(busy: list[PodInfo], settings: PreemptionSettings, left: int,
                       why: str) -> None:
    actions = _decide(busy, settings, left)
    assert preempts(actions) == [], why
    assert "train" in waits(actions)


def test_a_class_label_written_on_a_running_pod_does_not_protect_it() -> None:
    # Once a pod runs, its labels are its own to change; its PriorityClass is not.
    busy = [_replica("web", "a-n0", cls="inference", priority_class="airlock-scavenger"),
            *_blocked("b-n0")]
    (move,) = preempts(_decide(busy, PROTECTS_INFERENCE))
    assert [v.unit.name for v in move.victims] == ["web"]


def test_policy_protects_a_class_by_its_priority_class() -> None:
    policy = make_policy(preemption=PreemptionSpec.model_validate(
        {"defragmentation": {"enabled": True, "protectedClasses": ["inference"]}}))
    settings = preemption_of(policy)
    assert settings.protected_priority_classes == frozenset(
        {policy.classes["inference"].priority_class.name})


def test_an_elastic_gangs_pod_above_its_minimum_moves_and_its_gang_stays() -> None:
    # e-0 (its minimum of 1) runs in b, e-1 (above it) in a: e-1 moves, a frees.
    elastic = running("e", ["b-n1", "a-n0"], gpus=4, minimum=1)
    (move,) = preempts(_decide([*elastic, *_blocked("b-n0")]))
    assert [(p.name, v.cause) for v in move.victims for p in v.pods] == [("e-1", "move")]
    assert move.record.domain == "a"
