"""No more than what evicting on a set of nodes would cost: no choice of pods that frees
enough may cost less than the bound, whatever the priorities, starts and checkpoints."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from webhook.controller.core.identities import PodKey
from webhook.controller.core.preemption.costs import Costs, Holder, part_of

NOW = 100_000.0
YOUNG = NOW - 300


starts = st.one_of(st.just(0.0), st.sampled_from([1.0, 50_000.0, YOUNG, YOUNG + 1, NOW]),
                   st.floats(min_value=1.0, max_value=NOW))
holdings = st.lists(st.tuples(st.sampled_from([0, 1000, 50_000]), starts,
                              st.integers(min_value=1, max_value=8),
                              st.just(("ml", "p")),
                              st.one_of(st.none(), st.floats(min_value=1.0, max_value=NOW))),
                    max_size=30)


def _cost(pods: list[Holder]) -> tuple[int, float]:
    return (max(p[0] for p in pods),
            sum(p[2] * (NOW - max(p[1], p[4] or 0.0)) for p in pods))


@given(holdings, st.integers(min_value=1, max_value=100), st.data())
def test_no_choice_of_pods_that_frees_enough_costs_less_than_the_bound(
        pods: list[Holder], deficit: int, data: st.DataObject) -> None:
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
    pods: list[Holder] = [Holder(1000, NOW - 7200, 4, PodKey("ml", "old"), None),
                           Holder(1000, NOW - 36_000, 4, PodKey("ml", "saved"), NOW - 3600),
                           Holder(5000, NOW - 60, 8, PodKey("ml", "high"), None)]
    # 4 GPUs saved an hour ago, then 2 of the 4 started two hours ago.
    assert Costs(pods).bound(6, NOW) == (1000, 4 * 3600 + 2 * 7200 - 1.0)
    # Past what priority 1000 holds, priority 5000 must be taken too.
    assert Costs(pods).bound(9, NOW)[0] == 5000  # type: ignore[index]
    assert Costs(pods).bound(17, NOW) is None


def test_a_checkpoint_in_the_future_bounds_by_priority_alone() -> None:
    pods: list[Holder] = [Holder(1000, NOW - 7200, 4, PodKey("ml", "ahead"), NOW + 60)]
    assert Costs(pods).bound(2, NOW) == (1000, float("-inf"))


@given(holdings, st.lists(st.integers(min_value=0, max_value=3), max_size=30),
       st.integers(min_value=1, max_value=100))
def test_costs_built_from_nodes_parts_bound_as_costs_built_from_their_pods(
        pods: list[Holder], nodes: list[int], deficit: int) -> None:
    """A set's costs made of its nodes' parts (kept per node) are the costs of its pods,
    bit for bit: a plan must rank domains as it did before the parts."""
    on: dict[int, list[Holder]] = {}
    for i, pod in enumerate(pods):
        on.setdefault(nodes[i] if i < len(nodes) else 0, []).append(pod)
    ordered = [p for node in sorted(on) for p in on[node]]
    parts = [part_of(on[node]) for node in sorted(on)]
    assert Costs(parts=parts).bound(deficit, NOW) == Costs(ordered).bound(deficit, NOW)

