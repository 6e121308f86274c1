"""Each criterion of the victim order (`criteria`), one at a time, against planning by
exhaustion: every subset of the running units that lets the gang in, the cheapest by
`set_cost`. On units of one size (a whole node each), walking cheapest first and then
trimming what the fit does not need is exact, so the planner's choice must cost exactly
what the cheapest subset costs. (Units of several sizes make it a knapsack: there the walk
is a heuristic, and `test_controller_preempting` checks it against walking every domain.)
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

import hypothesis.strategies as st
from hypothesis import given, settings

from tests.builders import HOUR, NOW, TRAINING, cluster, gang, preemptor, single, tracked
from webhook.controller.core.actions import Victim
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.candidates import Candidates, unit_id
from webhook.controller.core.preemption.criteria import PreemptionSettings, set_cost
from webhook.controller.core.queues.quotas import Quotas

NODES = 6
MIN_RUNTIME = PreemptionSettings().min_runtime
# A node's running pod: (priority, hours since it started, hours since its checkpoint).
Holder = tuple[int, float, float]


def _cluster(holders: Sequence[Holder]) -> list[PodInfo]:
    pods = []
    for i, (priority, ran, saved) in enumerate(holders):
        pod = single(f"s{i}", f"a-n{i}", gpus=8, ran=ran * HOUR, priority=priority)
        pods.append(dataclasses.replace(pod, checkpointed=NOW - saved * HOUR))
    return pods


def _exhaustive(pods: list[PodInfo], want: int, priority: int) -> tuple[object, ...] | None:
    """The cost of the cheapest set of units whose eviction frees `want` nodes, each unit
    of lower priority and old enough, by trying every subset."""
    tracked_ = tracked(cluster({"a": NODES}), pods)
    units = Candidates(tracked_, Quotas(), NOW, PreemptionSettings())
    allowed: list[Victim] = []
    for pod in pods:
        unit = units.get(unit_id(pod))
        # The rules, written out: lower priority, and run at least the minimum runtime.
        if unit is not None and unit.priority < priority \
                and 0 < pod.started <= NOW - MIN_RUNTIME:
            allowed.append(unit)
    free = NODES - len(pods)
    if free >= want:
        return None  # room already: nobody need go
    best: tuple[object, ...] | None = None
    for size in range(want - free, len(allowed) + 1):
        for subset in itertools.combinations(allowed, size):
            cost = set_cost(subset)
            if best is None or cost < best:
                best = cost
    return best


def _planned(pods: list[PodInfo], want: int) -> tuple[object, ...] | None:
    members = gang("train", want, priority=TRAINING, mode="preferred")
    planner = preemptor(tracked(cluster({"a": NODES}), [*pods, *members]), Quotas())
    choice = planner.plan(members, "default", frozenset())
    return None if choice is None else set_cost(choice.victims)


def _agree(holders: list[Holder], want: int) -> None:
    pods = _cluster(holders)
    assert _planned(pods, want) == _exhaustive(pods, want, TRAINING)


# Each criterion alone: the others the same for every unit.
Vary = Callable[[int, float], Holder]
BY_CRITERION: dict[str, Vary] = {
    # Priority alone: same start, same checkpoint.
    "priority": lambda priority, _: (priority, 2.0, 2.0),
    # Work lost alone: same start (so the same age), checkpoints apart.
    "work lost": lambda _, hours: (1000, 3.0, hours),
    # Age alone: the same checkpoint (so the same work lost), starts apart.
    "age": lambda _, hours: (1000, 2.0 + hours, 1.0),
    # Minimum runtime: some have not run it (minutes, not hours), the rest alike.
    "minimum runtime": lambda _, hours: (1000, hours / 60, min(hours / 60, 1.0)),
}
holders = st.lists(st.tuples(st.sampled_from([100, 1000, 20000]),
                             st.floats(min_value=0.05, max_value=2.5)),
                   min_size=NODES - 2, max_size=NODES)


def _check(criterion: str, raw: list[tuple[int, float]], want: int) -> None:
    _agree([BY_CRITERION[criterion](p, h) for p, h in raw], want)


@settings(max_examples=60, deadline=None)
@given(raw=holders, want=st.integers(min_value=1, max_value=3))
def test_priority_alone(raw: list[tuple[int, float]], want: int) -> None:
    _check("priority", raw, want)


@settings(max_examples=60, deadline=None)
@given(raw=holders, want=st.integers(min_value=1, max_value=3))
def test_work_lost_alone(raw: list[tuple[int, float]], want: int) -> None:
    _check("work lost", raw, want)


@settings(max_examples=60, deadline=None)
@given(raw=holders, want=st.integers(min_value=1, max_value=3))
def test_age_alone(raw: list[tuple[int, float]], want: int) -> None:
    _check("age", raw, want)


@settings(max_examples=60, deadline=None)
@given(raw=holders, want=st.integers(min_value=1, max_value=3))
def test_minimum_runtime_alone(raw: list[tuple[int, float]], want: int) -> None:
    _check("minimum runtime", raw, want)


def test_the_exhaustive_planner_can_disagree() -> None:
    # What the comparison would catch: a planner that took the most expensive first.
    pods = _cluster([(1000, 3.0, h) for h in (0.5, 1.0, 2.0, 2.5)])
    cheapest = _exhaustive(pods, 3, TRAINING)
    assert cheapest is not None
    dearest = set_cost([u for u in (Candidates(tracked(cluster({"a": NODES}), pods), Quotas(),
                                               NOW, PreemptionSettings()).get(unit_id(p))
                                    for p in pods[-1:]) if u is not None])
    assert dearest != cheapest
