"""Elastic gangs: admitted once their minimum fits, with as many more as fit; the rest
join, into the gang's domain, as room frees, and never hold room or preempt for it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import NOW, TRAINING, cluster, member, running, tracked, unit
from webhook.controller.core.actions import Action, Admit, Preempt, Requeue, Wait
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.records import Record
from webhook.conventions.base import Elastic
from webhook.keys import GANG_EXPECTED_MIN_ANNOTATION

NO_PREEMPTION = QueueState(preemption=PreemptionSettings(enabled=False))


def elastic(name: str, indices: range, size: int = 4, least: int | None = 2,
            **kw: Any) -> list[PodInfo]:
    marks = {GANG_EXPECTED_MIN_ANNOTATION: str(least)} if least is not None else {}
    return [member(name, i, size=size, marks=marks, **kw) for i in indices]


def admitted(actions: list[Action]) -> list[str]:
    return sorted(p.name for a in actions if isinstance(a, Admit) for p in a.ungate)


def waits(actions: list[Action]) -> list[tuple[str, str]]:
    return [(a.reason, a.message) for a in actions if isinstance(a, Wait)]


@pytest.mark.parametrize(("free", "present", "expected"), [
    (3, 4, ["e-0", "e-1", "e-2"]),       # the minimum fits: as many as fit go
    (4, 4, ["e-0", "e-1", "e-2", "e-3"]),
    (4, 2, ["e-0", "e-1"]),               # the minimum is there: it need not wait for all
    (1, 4, []),                           # not even the minimum fits
])
def test_a_new_elastic_gang_goes_once_its_minimum_fits(free: int, present: int,
                                                       expected: list[str]) -> None:
    pods = elastic("e", range(present))
    actions = decide(tracked(cluster({"a": free}), pods), {}, NOW, state=NO_PREEMPTION)
    assert admitted(actions) == expected
    if expected:
        (admit,) = [a for a in actions if isinstance(a, Admit)]
        assert (admit.record.size, admit.record.minimum) == (4, 2)


def test_fewer_than_the_minimum_wait_and_say_how_many_it_runs_with() -> None:
    actions = decide(tracked(cluster({"a": 4}), elastic("e", range(1))), {}, NOW)
    assert waits(actions) == [("Incomplete", "Incomplete: 1/4 pods present, 2 to start; "
                                             "needs 32 GPUs in one nvidia.com/gpu.clique "
                                             "domain, the best has 32 free")]


def test_the_owner_states_the_minimum() -> None:
    pods = elastic("e", range(4), least=None)
    actions = decide(tracked(cluster({"a": 3}), pods), {unit("e"): Elastic(4, 2)}, NOW,
                     state=NO_PREEMPTION)
    assert admitted(actions) == ["e-0", "e-1", "e-2"]


def test_a_minimum_of_the_whole_gang_is_no_elastic_gang() -> None:
    actions = decide(tracked(cluster({"a": 3}), elastic("e", range(4), least=4)), {}, NOW,
                     state=NO_PREEMPTION)
    assert admitted(actions) == []


def _running_three() -> list[PodInfo]:
    """Three of a gang of 4 (minimum 2) run on a-n0..a-n2 of domain a; the fourth waits."""
    record = Record("a", "nvidia.com/gpu.clique", ("e-0", "e-1", "e-2"), NOW - 60, 4,
                    minimum=2)
    bound = [member("e", i, size=4, gated=False, node_name=f"a-n{i}",
                    marks={GANG_EXPECTED_MIN_ANNOTATION: "2"},
                    nodeSelector={"nvidia.com/gpu.clique": "a"},
                    placement=record if i == 0 else None) for i in range(3)]
    return [*bound, *elastic("e", range(3, 4))]


def test_a_pod_above_the_minimum_joins_in_the_gangs_domain_once_room_frees() -> None:
    pods = _running_three()
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW, state=NO_PREEMPTION)
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    assert [p.name for p in admit.ungate] == ["e-3"]
    assert admit.record.domain == "a"


def test_a_pod_above_the_minimum_waits_for_room_without_keeping_any() -> None:
    # Domain a is full; b is free, but the gang runs in a. The pod neither preempts nor
    # keeps room: the single pod behind it takes b.
    pods = [*_running_three(), *running("busy", ["a-n3"]),
            *elastic("next", range(2), size=2, least=None, created=5)]
    actions = decide(tracked(cluster({"a": 4, "b": 2}), pods), {}, NOW)
    assert ("Growing", "Waiting: 1 pods above the gang's minimum of 2 wait for room in "
                       "its domain") in waits(actions)
    assert admitted(actions) == ["next-0", "next-1"]


def test_an_elastic_gang_at_or_above_its_minimum_is_not_short() -> None:
    actions = decide(tracked(cluster({"a": 4}), _running_three()), {}, NOW,
                     state=QueueState(short_since={unit("e"): NOW - 3600}))
    assert not [a for a in actions if isinstance(a, Requeue)]


def _preempted(actions: list[Action]) -> list[str]:
    (preempt,) = [a for a in actions if isinstance(a, Preempt)]
    return sorted(p.name for v in preempt.victims for p in v.pods)


ABOVE = {"el-2", "el-3"}


@pytest.mark.parametrize(("pods", "among", "count"), [
    # Room for one pod: one of the elastic gang's pods above its minimum goes.
    (1, ABOVE, 1),
    # Two: both pods above the minimum, each a unit of its own.
    (2, ABOVE, 2),
    # Three: more than its pods above the minimum free: the whole gang goes, once.
    (3, {"el-0", "el-1", *ABOVE}, 4),
])
def test_an_elastic_gangs_pods_above_its_minimum_go_first_and_its_minimum_goes_whole(
        pods: int, among: set[str], count: int) -> None:
    running_gang = running("el", [f"a-n{i}" for i in range(4)], minimum=2)
    preemptor = [member("train", i, size=pods, priority=TRAINING) for i in range(pods)]
    actions = decide(tracked(cluster({"a": 4}), [*running_gang, *preemptor]), {}, NOW)
    victims = _preempted(actions)
    assert len(victims) == count
    assert set(victims) <= among


def test_a_pod_above_an_elastic_minimum_loses_its_whole_gangs_work() -> None:
    # An elastic job restarts every worker from its last checkpoint when one leaves: el's
    # pod above its minimum costs el's 32 GPU-hours, not its own 8, so the gang of two
    # (16) goes instead. Both ran an hour, at the same priority.
    el = running("el", [f"a-n{i}" for i in range(4)], minimum=2)
    other = running("other", ["a-n4", "a-n5"])
    preemptor = [member("train", 0, size=1, priority=TRAINING)]
    actions = decide(tracked(cluster({"a": 6}), [*el, *other, *preemptor]), {}, NOW)
    assert _preempted(actions) == ["other-0", "other-1"]


def test_pods_above_an_elastic_minimum_taken_together_lose_the_gangs_work_once() -> None:
    running_gang = running("el", [f"a-n{i}" for i in range(4)], minimum=2)
    preemptor = [member("train", i, size=2, priority=TRAINING) for i in range(2)]
    actions = decide(tracked(cluster({"a": 4}), [*running_gang, *preemptor]), {}, NOW)
    (preempt,) = [a for a in actions if isinstance(a, Preempt)]
    assert sorted(p.name for v in preempt.victims for p in v.pods) == ["el-2", "el-3"]
    assert [round(v.lost / 3600) for v in preempt.victims] == [32, 32]
    assert preempt.gpu_hours == pytest.approx(32)


def test_an_elastic_gang_evicted_in_a_round_does_not_grow_in_it() -> None:
    # el runs its minimum on a-n0 and a-n1, its two pods above it wait; train needs five
    # of a's six nodes and evicts el. The one node left would take an el pod, but el's
    # running members go: a pod let go beside them would run alone.
    running_gang = running("el", ["a-n0", "a-n1"], minimum=2, size=4)
    preemptor = [member("train", i, size=5, priority=TRAINING) for i in range(5)]
    pods = [*running_gang, *elastic("el", range(2, 4), priority=running_gang[0].priority),
            *preemptor]
    actions = decide(tracked(cluster({"a": 6}), pods), {}, NOW)
    assert _preempted(actions) == ["el-0", "el-1", "el-2", "el-3"]
    assert admitted(actions) == []


@pytest.mark.parametrize(("mode", "joins"), [("preferred", True), ("required", False)])
def test_a_gang_that_prefers_its_domain_grows_elsewhere_when_it_is_full(
        mode: str, joins: bool) -> None:
    record = Record("a", "nvidia.com/gpu.clique", ("e-0", "e-1", "e-2"), NOW - 60, 4,
                    minimum=2)
    bound = [member("e", i, size=4, gated=False, node_name=f"a-n{i}", mode=mode,
                    marks={GANG_EXPECTED_MIN_ANNOTATION: "2"},
                    nodeSelector={"nvidia.com/gpu.clique": "a"},
                    placement=record if i == 0 else None) for i in range(3)]
    pods = [*bound, *elastic("e", range(3, 4), mode=mode)]
    actions = decide(tracked(cluster({"a": 3, "b": 1}), pods), {}, NOW, state=NO_PREEMPTION)
    assert admitted(actions) == (["e-3"] if joins else [])
    if joins:
        (admit,) = [a for a in actions if isinstance(a, Admit)]
        assert admit.record.domain is None
