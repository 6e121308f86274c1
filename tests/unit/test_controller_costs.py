"""What evicting on a set of nodes would cost: the running totals must give what taking
the pods one by one gives, whatever the priorities, starts and checkpoints."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook.accelerators import GpuEquivalents
from webhook.controller.costs import Costs, Holding

NOW = 100_000.0
YOUNG = NOW - 300


def _one_by_one(pods: list[Holding], deficit: int, below: int) -> tuple[int, float] | None:
    """Lowest priority first, youngest first within one (ties: most GPUs first, as the
    running totals take them), until `deficit` GPUs are freed."""
    ready = [p for p in pods if p[0] < below and 0 < p[1] <= YOUNG]
    ready.sort(key=lambda p: (p[0], -p[1], -p[2], -p[2] * max(p[1], p[4] or 0.0)))
    freed: GpuEquivalents = 0
    lost = 0.0
    for priority, started, gpus, _, checkpointed in ready:
        freed += gpus
        lost += gpus * (NOW - max(started, checkpointed or 0.0))
        if freed >= deficit:
            return priority, lost
    return None


starts = st.one_of(st.just(0.0), st.sampled_from([1.0, 50_000.0, YOUNG, YOUNG + 1, NOW]),
                   st.floats(min_value=1.0, max_value=NOW))
holdings = st.lists(st.tuples(st.sampled_from([0, 1000, 50_000]), starts,
                              st.integers(min_value=1, max_value=8),
                              st.just(("ml", "p")),
                              st.one_of(st.none(), st.floats(min_value=1.0, max_value=NOW))),
                    max_size=30)


@given(holdings, st.integers(min_value=1, max_value=100),
       st.sampled_from([0, 1000, 1001, 50_000, 100_000]))
def test_the_running_totals_cost_what_taking_pods_one_by_one_costs(
        pods: list[Holding], deficit: int, below: int) -> None:
    got = Costs(pods).estimate(deficit, below, YOUNG, NOW)
    want = _one_by_one(pods, deficit, below)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert got[0] == want[0]
        assert got[1] == pytest.approx(want[1], rel=1e-9, abs=1e-3)


def test_the_youngest_go_first_and_pods_in_their_minimum_runtime_not_at_all() -> None:
    pods: list[Holding] = [(1000, NOW - 7200, 4, ("ml", "old"), None),
                           (1000, NOW - 3600, 4, ("ml", "mid"), None),
                           (1000, NOW - 60, 4, ("ml", "young"), None),
                           (1000, 0.0, 4, ("ml", "pending"), None)]
    costs = Costs(pods)
    assert costs.estimate(4, 50_000, YOUNG, NOW) == (1000, 4 * 3600)
    assert costs.estimate(8, 50_000, YOUNG, NOW) == (1000, 4 * 3600 + 4 * 7200)
    assert costs.estimate(9, 50_000, YOUNG, NOW) is None
    assert costs.estimate(4, 1000, YOUNG, NOW) is None  # not below its own priority


def test_a_checkpoint_lowers_the_work_lost() -> None:
    saved: list[Holding] = [(1000, NOW - 7200, 8, ("ml", "p"), NOW - 600)]
    assert Costs(saved).estimate(8, 50_000, YOUNG, NOW) == (1000, 8 * 600)


def _cost(pods: list[Holding]) -> tuple[int, float]:
    return (max(p[0] for p in pods),
            sum(p[2] * (NOW - max(p[1], p[4] or 0.0)) for p in pods))


@given(holdings, st.integers(min_value=1, max_value=100), st.data())
def test_no_choice_of_pods_that_frees_enough_costs_less_than_the_bound(
        pods: list[Holding], deficit: int, data: st.DataObject) -> None:
    """Whatever pods a plan takes (whole units are sets of them), if they free `deficit`
    GPUs, their cost (highest priority, then work lost) is at least the bound."""
    bound = Costs(pods).bound(deficit, NOW)
    if sum(p[2] for p in pods) < deficit:
        assert bound is None
        return
    assert bound is not None
    taken = data.draw(st.lists(st.booleans(), min_size=len(pods), max_size=len(pods)))
    chosen = [p for p, take in zip(pods, taken, strict=True) if take]
    if sum(p[2] for p in chosen) < deficit:
        chosen = pods
    assert bound <= _cost(chosen)


def test_the_bound_takes_the_least_lost_per_gpu_first_and_the_last_pod_in_part() -> None:
    pods: list[Holding] = [(1000, NOW - 7200, 4, ("ml", "old"), None),
                           (1000, NOW - 36_000, 4, ("ml", "saved"), NOW - 3600),
                           (5000, NOW - 60, 8, ("ml", "high"), None)]
    # 4 GPUs saved an hour ago, then 2 of the 4 started two hours ago.
    assert Costs(pods).bound(6, NOW) == (1000, 4 * 3600 + 2 * 7200 - 1.0)
    # Past what priority 1000 holds, priority 5000 must be taken too.
    assert Costs(pods).bound(9, NOW)[0] == 5000  # type: ignore[index]
    assert Costs(pods).bound(17, NOW) is None


def test_a_checkpoint_in_the_future_bounds_by_priority_alone() -> None:
    pods: list[Holding] = [(1000, NOW - 7200, 4, ("ml", "ahead"), NOW + 60)]
    assert Costs(pods).bound(2, NOW) == (1000, float("-inf"))
