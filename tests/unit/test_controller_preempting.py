"""Preemption, decided in the pure core: whole gangs, cheapest first, within the rules
(priority, reclaim, minRuntime, PodDisruptionBudgets), and the room held afterwards."""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import (
    CLIQUE,
    HOUR,
    NOW,
    SCAVENGER,
    SEAL,
    TRAINING,
    admitted,
    cluster,
    gang,
    preempting,
    preemptor,
    preempts,
    raw_member,
    running,
    single,
    told,
    tracked,
    two_victims_record,
    uid_of,
    unit,
    waits,
)
from webhook.controller.core.actions import (
    Admit,
    Preempt,
    Requeue,
    Wait,
    events_of,
)
from webhook.controller.core.deciding import QueueState, Record, decide, decided
from webhook.controller.core.forecasting import Prediction, forecast
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Budget
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.preemption.ranking import Rankings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.queues.shortfalls import short
from webhook.controller.core.records import PreemptionRecord
from webhook.controller.shells.patches import disruption_patch


def victims(action: Preempt) -> set[str]:
    return {f"{p.name}" for v in action.victims for p in v.pods}


def training(n: int = 2, **kw: Any) -> list[PodInfo]:
    return gang("train", n, priority=TRAINING, **kw)


def test_a_training_gang_evicts_the_fewest_cheapest_gangs_whole() -> None:
    # Domain a: three nodes, each full with a scavenger gang; the training gang needs
    # two nodes there. The gang that has run longest loses the most work and stays.
    nodes = cluster({"a": 3})
    old = running("old", ["a-n0", "a-n0"], gpus=4, ran=5 * HOUR)
    mid = running("mid", ["a-n1", "a-n1"], gpus=4, ran=2 * HOUR)
    new = running("new", ["a-n2"], gpus=8, ran=1 * HOUR)
    (action,) = preempts(decide(tracked(nodes, old + mid + new + training()), {}, NOW))
    assert victims(action) == {"mid-0", "mid-1", "new-0"}
    assert action.record.domain == "a"
    assert {v.cause for v in action.victims} == {"priority"}
    assert action.gpu_hours == pytest.approx(8 * 2 + 8 * 1)


def test_the_cheapest_domain_wins_and_gangs_spanning_it_go_whole() -> None:
    # In b, a cheap gang spans b and c; evicting it frees b-n0 and loses less work than
    # evicting a's long-running pods. Its member on c goes too: never half a gang.
    nodes = cluster({"a": 2, "b": 2, "c": 1})
    busy = running("long", ["a-n0", "a-n1"], ran=10 * HOUR)
    busy += running("span", ["b-n0", "c-n0"], ran=HOUR)
    busy += running("b1", ["b-n1"], ran=HOUR)
    (action,) = preempts(decide(tracked(nodes, busy + training()), {}, NOW))
    assert action.record.domain == "b"
    assert victims(action) == {"span-0", "span-1", "b1-0"}


def test_unneeded_victims_are_dropped() -> None:
    # Cheapest first would take the single pods, then need the gang anyway: once the
    # gang is in, the single pods are not needed and stay.
    nodes = cluster({"a": 2})
    busy = [single(f"s{i}", "a-n0", ran=600) for i in range(2)]
    busy += running("g", ["a-n0"], gpus=6, ran=2 * HOUR)
    busy += running("h", ["a-n1"], ran=HOUR)
    (action,) = preempts(decide(tracked(nodes, busy + training(1)), {}, NOW))
    assert victims(action) == {"h-0"}


def test_checkpoints_lower_the_work_lost() -> None:
    nodes = cluster({"a": 2})
    busy = running("fresh", ["a-n0"], ran=HOUR)
    busy += running("saved", ["a-n1"], ran=5 * HOUR, checkpointed=60)
    (action,) = preempts(decide(tracked(nodes, busy + training(1)), {}, NOW))
    assert victims(action) == {"saved-0"}
    assert action.gpu_hours == pytest.approx(8 * 60 / HOUR)


def test_lower_priority_goes_before_less_work() -> None:
    nodes = cluster({"a": 2})
    busy = running("cheap-but-important", ["a-n0"], ran=60 * 6, priority=20000)
    busy += running("scavenger", ["a-n1"], ran=10 * HOUR)
    (action,) = preempts(decide(tracked(nodes, busy + training(1)), {}, NOW))
    assert victims(action) == {"scavenger-0"}


def test_a_large_domain_is_checked_for_packing_then_ranked_like_a_small_one() -> None:
    # Whether the gang could pack is asked first. Each node is full with one scavenger
    # pod; the two that ran least go.
    nodes = cluster({"a": 150})
    busy = [single(f"s{i}", n.name, gpus=8, ran=(i + 2) * HOUR) for i, n in enumerate(nodes)]
    young = [single("young", nodes[-1].name, gpus=8, ran=60)]
    busy[-1:] = young
    (action,) = preempts(decide(tracked(nodes, busy + training()), {}, NOW))
    assert victims(action) == {"s0", "s1"}


def test_a_large_domain_where_the_gang_could_not_pack_evicts_nothing() -> None:
    # Enough scavenger GPUs in all, but one per node beside a pod of higher priority:
    # no 8-GPU pod could go anywhere, so nothing is evicted for nothing.
    nodes = cluster({"a": 150})
    busy = [p for i, n in enumerate(nodes) for p in (
        single(f"s{i}", n.name, gpus=1, ran=2 * HOUR),
        single(f"keep{i}", n.name, gpus=7, ran=2 * HOUR, priority=TRAINING + 1))]
    actions = decide(tracked(nodes, busy + training()), {}, NOW)
    assert not preempts(actions)
    assert "train" in waits(actions)


def test_min_runtime_protects_a_young_job() -> None:
    nodes = cluster({"a": 2})
    busy = running("young", ["a-n0", "a-n1"], ran=60)
    actions = decide(tracked(nodes, busy + training()), {}, NOW)
    assert not preempts(actions)
    assert "train" in waits(actions)
    later = running("young", ["a-n0", "a-n1"], ran=600)
    assert preempts(decide(tracked(nodes, later + training()), {}, NOW))


def test_a_pdb_that_allows_no_disruption_is_respected() -> None:
    nodes = cluster({"a": 2})
    busy = running("guarded", ["a-n0", "a-n1"])
    keys = frozenset(p.key for p in busy)
    closed = QueueState(budgets=(Budget("ml/guarded", 0, keys),))
    assert not preempts(decide(tracked(nodes, busy + training()), {}, NOW, state=closed))
    # One disruption allowed is not enough for a gang of two: still none.
    one = QueueState(budgets=(Budget("ml/guarded", 1, keys),))
    assert not preempts(decide(tracked(nodes, busy + training()), {}, NOW, state=one))
    two = QueueState(budgets=(Budget("ml/guarded", 2, keys),))
    assert preempts(decide(tracked(nodes, busy + training()), {}, NOW, state=two))


def test_a_class_that_never_preempts_waits() -> None:
    nodes = cluster({"a": 2})
    busy = running("low", ["a-n0", "a-n1"], priority=10)
    meek = gang("meek", 2, priority=SCAVENGER, preemptionPolicy="Never")
    actions = decide(tracked(nodes, busy + meek), {}, NOW)
    assert not preempts(actions)
    assert "meek" in waits(actions)


def test_equal_priority_in_the_same_queue_is_never_a_victim() -> None:
    nodes = cluster({"a": 2})
    busy = running("peer", ["a-n0", "a-n1"], priority=TRAINING)
    assert not preempts(decide(tracked(nodes, busy + training()), {}, NOW))


def test_a_gang_waits_a_while_before_it_preempts() -> None:
    nodes = cluster({"a": 2})
    train = training()
    complete = max(p.created for p in train)
    busy = running("s", ["a-n0", "a-n1"], ran=NOW - (complete - HOUR))  # long before
    settings = QueueState(preemption=PreemptionSettings(delay=30))
    assert not preempts(decide(tracked(nodes, busy + train), {}, complete + 10, state=settings))
    assert preempts(decide(tracked(nodes, busy + train), {}, complete + 40, state=settings))


@pytest.mark.parametrize(("priority_class", "waits_for"), [
    ("airlock-inference", 0.0),  # its class's own delay
    ("airlock-training", 30.0),  # a class that sets none: the policy's
])
def test_a_class_may_preempt_after_a_delay_of_its_own(priority_class: str,
                                                      waits_for: float) -> None:
    nodes = cluster({"a": 2})
    arrived = gang("serve", 2, priority=TRAINING * 2, priorityClassName=priority_class)
    complete = max(p.created for p in arrived)
    busy = running("s", ["a-n0", "a-n1"], ran=NOW - (complete - HOUR))
    settings = QueueState(preemption=PreemptionSettings(
        delay=30, delay_by_priority_class=(("airlock-inference", 0.0),)))
    for after in (waits_for - 1, waits_for):
        decided = decide(tracked(nodes, busy + arrived), {}, complete + after, state=settings)
        assert bool(preempts(decided)) is (after >= waits_for)


def test_disabled_preemption_only_waits() -> None:
    nodes = cluster({"a": 2})
    off = QueueState(preemption=PreemptionSettings(enabled=False))
    busy = running("s", ["a-n0", "a-n1"])
    assert not preempts(decide(tracked(nodes, busy + training()), {}, NOW, state=off))


def test_an_evicted_gang_backs_off_before_it_is_considered_again() -> None:
    nodes = cluster({"a": 2})
    state = QueueState(evicted={unit("train"): NOW - 10},
                       preemption=PreemptionSettings(requeue_backoff=120))
    actions = decide(tracked(nodes, training()), {}, NOW, state=state)
    assert waits(actions)["train"] == ("Waiting: preempted 10s ago; back in the queue in "
                                       "110s")
    assert admitted(decide(tracked(nodes, training()),
                           {}, NOW + 200, state=state)) == {"train": "a"}


def test_a_recorded_preemption_is_finished_by_the_next_leader() -> None:
    nodes = cluster({"a": 2, "b": 2})
    busy = running("s", ["a-n0", "a-n1"])
    record = two_victims_record(NOW - 5)
    train = preempting(2, record)
    rival = gang("rival", 2, priority=TRAINING * 2)
    actions = decide(tracked(nodes, busy + train + rival), {}, NOW)
    (resume,) = preempts(actions)
    assert victims(resume) == {"s-0", "s-1"}
    assert resume.unit == unit("train")
    # The rival, higher still, does not take the preemptor's domain: it goes to b.
    assert admitted(actions) == {"rival": "b"}


def test_the_room_a_preemption_freed_is_held_for_the_preemptor() -> None:
    nodes = cluster({"a": 2})
    record = two_victims_record(NOW - 5)
    train = preempting(2, record)
    small = gang("small", 1, priority=TRAINING * 2)  # would fit, and goes first otherwise
    actions = decide(tracked(nodes, train + small), {}, NOW)
    assert admitted(actions) == {"train": "a"}
    assert "small" in waits(actions)
    # Once the hold expires, the room is anybody's.
    stale = decide(tracked(nodes, train + small), {}, NOW + 3600)
    assert admitted(stale) == {"small": "a"}


def _victims_as(state: str) -> tuple[list[PodInfo], frozenset[str]]:
    """The two pods of victim gang `s` on a-n0 and a-n1, in `state`, and the uids this
    controller deleted that the watch has not reported yet."""
    busy = running("s", ["a-n0", "a-n1"])
    match state:
        case "gone":
            return [], frozenset()
        case "running":
            return busy, frozenset()
        case "deleting":
            return [dataclasses.replace(p, deleting=True) for p in busy], frozenset()
        case "failed":
            return [dataclasses.replace(p, terminal=True) for p in busy], frozenset()
        case "deleted, not yet watched":
            return busy, frozenset(p.uid for p in busy)
        case "one gone, one deleting":
            return [dataclasses.replace(busy[0], deleting=True)], frozenset()
    raise AssertionError(state)


@pytest.mark.parametrize(("victims_are", "outcome"), [
    ("gone", Admit),
    ("failed", Admit),  # terminal: the scheduler no longer counts it
    ("deleting", Wait),
    ("deleted, not yet watched", Wait),
    ("one gone, one deleting", Wait),
    ("running", Preempt),  # a leader died before evicting them: the eviction is finished
])
def test_a_preemptor_is_lifted_only_once_its_victims_are_gone(
        victims_are: str, outcome: type) -> None:
    nodes = cluster({"a": 2})
    busy, deleted = _victims_as(victims_are)
    record = two_victims_record(NOW - 5)
    # Would fit in the freed room, and goes first otherwise.
    rival = gang("rival", 1, priority=TRAINING * 2)
    actions = decide(tracked(nodes, busy + preempting(2, record) + rival), {}, NOW,
                     state=QueueState(deleted=deleted))
    (mine,) = [a for a in actions if a.unit == unit("train")]
    assert type(mine) is outcome
    # Whatever the victims' state, their room is the preemptor's: never the rival's.
    assert "rival" not in admitted(actions)
    if isinstance(mine, Admit):
        assert mine.record.domain == "a"
        assert {node for _, node in mine.nominate} == {"a-n0", "a-n1"}
    if isinstance(mine, Wait):
        assert {p.name for p in mine.pods} == {"train-0", "train-1"}
        assert mine.message == ("Waiting: 2 pods present; the 2 pods it preempted are not "
                                "all gone yet (terminating); the room in domain a is held "
                                "for it until they are")
    if isinstance(mine, Preempt):
        assert victims(mine) == {"s-0", "s-1"}


def test_a_preemptor_waiting_for_its_victims_keeps_its_queues_quota() -> None:
    # team-a may use 16 GPUs and no more; its gang `want` evicted scavengers in domain x
    # and waits for them to terminate. Its next gang fits on y, but not in the quota
    # once `want` counts: it must not go in before `want` and push team-a past 16.
    quotas = Quotas([QueueSpec("team-a", ("a-*",), nominal=16, borrowing_limit=0)])
    nodes = cluster({"x": 2, "y": 2})
    terminating = [dataclasses.replace(p, deleting=True) for p in running("s", ["x-n0", "x-n1"])]
    record = PreemptionRecord("x", CLIQUE, ("ml/s-0", "ml/s-1"),
                              ("x-n0", "x-n1"), NOW - 5,
                              (uid_of("ml", "s-0"), uid_of("ml", "s-1")))
    want = preempting(2, record, "want", "a-ml")
    more = gang("more", 2, ns="a-ml", priority=TRAINING, created=30)
    state = QueueState(quotas)
    actions = decide(tracked(nodes, terminating + want + more), {}, NOW, state=state)
    assert waits(actions)["want"].startswith("Waiting: 2 pods present; the 2 pods it "
                                             "preempted are not all gone yet")
    assert waits(actions)["more"] == ("Waiting: 2/2 pods present; queue team-a would use 32 "
                                      "GPUs: nominal 16, borrowing limit 0")
    # Once the victims are gone, `want` goes; `more` still waits for quota.
    actions = decide(tracked(nodes, want + more), {}, NOW, state=state)
    assert admitted(actions) == {"want": "x"}


def test_room_a_preemption_frees_beyond_its_hold_is_nobodys_until_its_pods_are_gone(
) -> None:
    # `train` evicted all four pods of `s` for the two nodes of domain a. Those on b are
    # terminating: kube-scheduler counts them until they are gone, so a gang lifted onto
    # b now would bind in part and hold GPUs while the rest waits (seen on the sandbox).
    nodes = cluster({"a": 2, "b": 2})
    going = [dataclasses.replace(p, deleting=True)
             for p in running("s", ["a-n0", "a-n1", "b-n0", "b-n1"])]
    record = two_victims_record(NOW - 5)
    train = preempting(2, record)
    other = gang("other", 2, priority=TRAINING, created=30)
    actions = decide(tracked(nodes, going + train + other), {}, NOW)
    assert admitted(actions) == {}
    assert "other" in waits(actions)
    assert preempts(actions) == []
    # Gone from the API, their room is free: both go.
    actions = decide(tracked(nodes, train + other), {}, NOW)
    assert admitted(actions) == {"train": "a", "other": "b"}


def test_room_its_victims_hold_beyond_the_preemptors_nodes_is_nobodys_in_that_round(
) -> None:
    # `serve` evicts all four pods of `s` and needs two nodes. The other two stay `s`'s
    # until its pods are gone: `other`, behind it in the same round, may not have them
    # (lifted now, it would bind once they are gone, or in part), nor evict for them.
    nodes = cluster({"a": 4})
    busy = running("s", ["a-n0", "a-n1", "a-n2", "a-n3"])
    serve = gang("serve", 2, priority=TRAINING * 2)
    other = gang("other", 1, priority=TRAINING, created=30)
    actions, r = decided(tracked(nodes, busy + serve + other), {}, NOW)
    (preempt,) = preempts(actions)
    assert preempt.unit == unit("serve")
    assert victims(preempt) == {"s-0", "s-1", "s-2", "s-3"}
    assert admitted(actions) == {}
    assert waits(actions)["other"].endswith(
        "pods being deleted hold room it would fit in, and it waits for them rather than "
        "evict others")
    # Predicted to start once they are gone: now, a grace period not played forward.
    assert forecast(r, actions)[unit("other")] == Prediction(NOW)


def test_a_gang_that_fits_where_pods_are_being_deleted_waits_for_them_not_evicting_more(
) -> None:
    # Room on b frees by itself within a grace period: evicting the scavengers on c
    # instead would lose their work for nothing.
    nodes = cluster({"b": 2, "c": 2})
    going = [dataclasses.replace(p, deleting=True) for p in running("s", ["b-n0", "b-n1"])]
    cheap = running("cheap", ["c-n0", "c-n1"])
    other = gang("other", 2, priority=TRAINING)
    actions = decide(tracked(nodes, going + cheap + other), {}, NOW)
    assert preempts(actions) == []
    assert waits(actions)["other"].endswith(
        "the best has 0 free; pods being deleted hold room it would fit in, and it waits "
        "for them rather than evict others")
    # Running, not being deleted, the pods on b are victims like those on c.
    actions = decide(tracked(nodes, running("s", ["b-n0", "b-n1"]) + cheap + other), {}, NOW)
    assert len(preempts(actions)) == 1


def test_in_the_round_it_preempts_the_room_is_the_preemptors() -> None:
    nodes = cluster({"a": 2})
    busy = running("s", ["a-n0", "a-n1"])
    # A lower-priority gang behind must not take what the eviction frees this round.
    behind = gang("behind", 1, priority=TRAINING - 1, created=30)
    actions = decide(tracked(nodes, busy + training() + behind), {}, NOW)
    assert len(preempts(actions)) == 1
    assert "behind" not in admitted(actions)


def test_events_on_both_sides() -> None:
    nodes = cluster({"a": 2})
    busy = running("s", ["a-n0", "a-n1"], ran=2 * HOUR)
    (action,) = preempts(decide(tracked(nodes, busy + training()), {}, NOW))
    victim, preemptor = events_of(action)
    assert victim.reason == "Preempted"
    assert victim.type == "Warning"
    assert victim.message == ("Preempted: a gang of higher priority needs the room; evicted "
                              "to make room for gang ml/train (priority 50000, queue "
                              "default) in domain a, losing 32.0 GPU-hours")
    assert {p.name for p in victim.pods} == {"s-0", "s-1"}
    assert preemptor.reason == "Preempting"
    assert told(action) == victim.message
    assert preemptor.message == ("Preempting: evicting gang ml/s to make room in domain a, "
                                 "losing 32.0 GPU-hours")


def test_reclaim_takes_whole_gangs_and_never_below_nominal() -> None:
    quotas = Quotas([QueueSpec("team-a", ("a-*",), nominal=16),
                     QueueSpec("team-b", ("b-*",), nominal=16)])
    nodes = cluster({"x": 4})
    # team-b borrows 8: it runs 24, as a 16-GPU gang and an 8-GPU gang.
    busy = running("big", ["x-n0", "x-n1"], ns="b-ml", priority=TRAINING)
    busy += running("small", ["x-n2"], ns="b-ml", priority=TRAINING)
    want = gang("want", 2, ns="a-ml", priority=TRAINING)
    (action,) = preempts(decide(tracked(nodes, busy + want), {}, NOW, state=QueueState(quotas)))
    # Evicting `big` would leave team-b at 8, below its 16: only `small` may go.
    assert victims(action) == {"small-0"}
    assert [v.cause for v in action.victims] == ["reclaim"]


@pytest.mark.parametrize(("victim_priority", "cause", "told"), [
    (TRAINING, "reclaim", "its queue borrowed GPUs their owner now reclaims"),
    (SCAVENGER, "priority", "a gang of higher priority needs the room"),
])
def test_a_resumed_preemption_gives_the_cause_the_deciding_leader_would_have(
        victim_priority: int, cause: str, told: str) -> None:
    # The leader that decided died before evicting; the next one says the same why.
    quotas = Quotas([QueueSpec("team-a", ("a-*",), nominal=16),
                     QueueSpec("team-b", ("b-*",), nominal=0)])
    busy = running("big", ["x-n0", "x-n1"], ns="b-ml", priority=victim_priority)
    record = PreemptionRecord("x", CLIQUE, ("b-ml/big-0", "b-ml/big-1"),
                              ("x-n0", "x-n1"), NOW - 5,
                              (uid_of("b-ml", "big-0"), uid_of("b-ml", "big-1")))
    want = preempting(2, record, "want", "a-ml")
    (resume,) = preempts(decide(tracked(cluster({"x": 2}), busy + want), {}, NOW,
                                state=QueueState(quotas)))
    assert [v.cause for v in resume.victims] == [cause]
    (told_first, *_) = events_of(resume)
    assert told_first.message.startswith(f"Preempted: {told}; evicted to make room for gang "
                                         "a-ml/want")


# One node's holders: None (free), a single pod's (GPUs, hours run, priority, queue),
# or a gang's over both nodes of the domain, drawn for its first node (on the second, a
# gang drawn stands for nothing: the node is the first's gang's, or free).
_HOLDERS = st.one_of(
    st.none(),
    st.tuples(st.just("single"), st.sampled_from([1, 4, 8]), st.integers(1, 20),
              st.sampled_from([SCAVENGER, TRAINING]), st.sampled_from(["a-ml", "b-ml"])),
    st.tuples(st.just("gang"), st.just(8), st.integers(1, 20),
              st.sampled_from([SCAVENGER, TRAINING]), st.sampled_from(["a-ml", "b-ml"])))


# The waiting gangs' queue reclaims (its nominal covers them) or takes by priority alone.
_RECLAIMING = Quotas([QueueSpec("team-a", ("a-*",), nominal=96),
                      QueueSpec("team-b", ("b-*",), nominal=0)])
_BY_PRIORITY = Quotas()


def _plans(holders: list[Any], quotas: Quotas, monkeypatch: pytest.MonkeyPatch | None
           ) -> list[tuple[str | None, frozenset[str]] | None]:
    """The plan of each of three gangs in turn, each committed, on 6 domains of 2 nodes;
    with `monkeypatch`, ranked by every domain's estimate instead."""
    if monkeypatch is not None:
        def every_estimate(_: Rankings, domains: Any, _need: Any, _below: Any,
                           estimate: Any, _overran: Any = frozenset()) -> list[Any]:
            return sorted((cost, str(domain), domain) for domain, usable in domains.items()
                          if (cost := estimate(usable)) is not None)
        monkeypatch.setattr(Rankings, "ranked", every_estimate)
    nodes = cluster({f"d{i}": 2 for i in range(6)})
    pods: list[PodInfo] = []
    taken: set[int] = set()
    for i, holder in enumerate(holders):
        if holder is None or i in taken:
            continue
        kind, gpus, hours, priority, ns = holder
        if kind == "single":
            pods.append(single(f"s{i}", nodes[i].name, gpus, ran=hours * HOUR,
                               priority=priority, ns=ns))
        elif i % 2 == 0:  # a gang within its domain's two nodes
            taken.add(i + 1)
            pods += running(f"g{i}", [nodes[i].name, nodes[i + 1].name], gpus,
                            ran=hours * HOUR, priority=priority, ns=ns)
    wanting = [gang(f"want{k}", 2, ns="a-ml", priority=TRAINING) for k in range(3)]
    cluster_ = tracked(nodes, pods + [p for w in wanting for p in w])
    planner = preemptor(cluster_, quotas)
    queue = quotas.queue_of("a-ml")
    plans: list[tuple[str | None, frozenset[str]] | None] = []
    for members in wanting:
        choice = planner.plan(members, queue, frozenset())
        plans.append(None if choice is None else
                     (choice.domain, frozenset(v.unit.path for v in choice.victims)))
        if choice is not None:
            planner.commit(choice, members, queue)
    return plans


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(holders=st.lists(_HOLDERS, min_size=12, max_size=12),
       quotas=st.sampled_from([_RECLAIMING, _BY_PRIORITY]))
def test_a_preemptor_walks_few_domains_and_plans_as_if_it_walked_all(
        holders: list[Any], quotas: Quotas, monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patched:
        walked_all = _plans(holders, quotas, patched)
    assert _plans(holders, quotas, None) == walked_all


def test_a_gang_is_weighed_whole_when_domains_are_ranked() -> None:
    # Three domains held each by a young gang, one by single pods that ran longer. A gang
    # pod frees as much as a node of single pods and has run less, but taking it takes
    # its whole gang: the single pods lose less work, and they go.
    nodes = cluster({"a": 2, "b": 2, "c": 2, "d": 2})
    busy = [p for d in "abc" for p in running(f"g{d}", [f"{d}-n0", f"{d}-n1"], ran=HOUR)]
    busy += [single(f"s{n}-{i}", f"d-n{n}", ran=1.5 * HOUR) for n in range(2)
             for i in range(8)]
    (action,) = preempts(decide(tracked(nodes, busy + training(1)), {}, NOW))
    assert action.record.domain == "d"
    assert action.gpu_hours == pytest.approx(8 * 1.5)
    assert len(victims(action)) == 8


def test_no_reclaim_for_a_queue_that_would_exceed_its_own_nominal() -> None:
    quotas = Quotas([QueueSpec("team-a", ("a-*",), nominal=8),
                     QueueSpec("team-b", ("b-*",), nominal=8)])
    nodes = cluster({"x": 4})
    busy = running("b1", ["x-n0", "x-n1", "x-n2", "x-n3"], ns="b-ml", priority=TRAINING)
    want = gang("want", 2, ns="a-ml", priority=TRAINING)
    actions = decide(tracked(nodes, busy + want), {}, NOW, state=QueueState(quotas))
    assert not preempts(actions)
    assert "want" in waits(actions)


def test_pods_out_of_scope_are_never_victims() -> None:
    nodes = cluster({"a": 2})
    system = running("system", ["a-n0", "a-n1"], ns="kube-system", priority=0)
    state = QueueState(spared=frozenset({"kube-system"}))
    assert not preempts(decide(tracked(nodes, system + training()), {}, NOW, state=state))
    assert preempts(decide(tracked(nodes, system + training()), {}, NOW))


def test_a_pod_recreated_under_a_victims_name_is_not_evicted_again() -> None:
    nodes = cluster({"a": 2, "b": 2})
    busy = running("s", ["a-n0", "a-n1"])
    record = PreemptionRecord("a", CLIQUE, ("ml/s-0", "ml/s-1"),
                              ("a-n0", "a-n1"), NOW - 5, ("old-uid-0", "old-uid-1"))
    actions = decide(tracked(nodes, busy + preempting(2, record)), {}, NOW)
    assert not preempts(actions)


def _admitted_gang(n: int, size: int, succeeded: int = 0) -> list[PodInfo]:
    """A gang admitted whole as `size` pods, of which `n` still run and `succeeded`
    finished."""
    record = Record("a", CLIQUE, tuple(f"g-{i}" for i in range(size)),
                    NOW - HOUR, size)
    pods = []
    for i in range(n + succeeded):
        raw = raw_member("g", i, 8, size, gated=False, node_name=f"a-n{i % 2}",
                         placement=record if i == 0 else None)
        if i >= n:
            raw["status"] = {"phase": "Succeeded"}
        pods.append(PodInfo.parse(raw, SEAL))
    return pods


def requeues(actions: list[Any]) -> list[Requeue]:
    return [a for a in actions if isinstance(a, Requeue)]


def test_a_gang_short_of_members_past_the_grace_period_is_requeued_whole() -> None:
    nodes = cluster({"a": 2})
    pods = _admitted_gang(3, 4)
    settings = PreemptionSettings(stale_grace=600)
    recent = QueueState(preemption=settings, short_since={unit("g"): NOW - 60})
    assert not requeues(decide(tracked(nodes, pods), {}, NOW, state=recent))
    stale = QueueState(preemption=settings, short_since={unit("g"): NOW - 700})
    (requeue,) = requeues(decide(tracked(nodes, pods), {}, NOW, state=stale))
    assert {p.name for p in requeue.pods} == {"g-0", "g-1", "g-2"}
    (told,) = events_of(requeue)
    assert told.message == ("Requeued: the gang has 3 of its 4 members, for 700s; the rest "
                            "is evicted so it starts again whole")


def test_members_that_finished_are_not_lost() -> None:
    pods = _admitted_gang(2, 4, succeeded=2)
    stale = QueueState(short_since={unit("g"): NOW - 3600})
    assert not requeues(decide(tracked(cluster({"a": 2}), pods), {}, NOW, state=stale))
    for present, expected in ((pods, {}), (pods[:3], {unit("g"): (3, 4)})):
        membership = tracked([], present).membership
        assert short(membership.gangs().values(), membership.succeeded) == expected


def test_a_victim_is_marked_as_kubernetes_marks_a_preemption() -> None:
    at = datetime.datetime(2030, 1, 1, tzinfo=datetime.UTC)
    (condition,) = disruption_patch("Preempted: why", at)["status"]["conditions"]
    # kube-scheduler reads this reason as "already going": it does not preempt again for
    # a pod nominated to that node; a Job's podFailurePolicy reads the type.
    assert condition == {"type": "DisruptionTarget", "status": "True",
                         "reason": "PreemptionByScheduler", "message": "Preempted: why",
                         "lastTransitionTime": "2030-01-01T00:00:00Z"}


def test_victims_this_controller_deleted_are_not_evicted_twice() -> None:
    # The watch has not told of the deletion yet: the pods still look running.
    nodes = cluster({"a": 2, "b": 2})
    busy = running("s", ["a-n0", "a-n1"])
    record = two_victims_record(NOW - 1)
    state = QueueState(deleted=frozenset(p.uid for p in busy))
    assert not preempts(decide(tracked(nodes, busy + preempting(2, record)), {}, NOW, state=state))
    assert preempts(decide(tracked(nodes, busy + preempting(2, record)), {}, NOW))


def test_a_preemptor_waits_for_its_victims_and_evicts_nobody_else() -> None:
    # Every node is full. The recorded victims (domain a) were deleted, but the watch
    # still shows them running: the gang waits for them rather than evict domain b too.
    nodes = cluster({"a": 2, "b": 2})
    busy, others = (running(name, hosts)
                    for name, hosts in (("s", ["a-n0", "a-n1"]), ("t", ["b-n0", "b-n1"])))
    record = two_victims_record(NOW - 1)
    state = QueueState(deleted=frozenset(p.uid for p in busy),
                       preemption=PreemptionSettings(delay=0, min_runtime=0))
    actions = decide(tracked(nodes, busy + others + preempting(2, record)), {}, NOW, state=state)
    assert not preempts(actions)
    assert "train" in waits(actions)
    # Once the watch shows them gone, the gang goes into the room they left.
    assert admitted(decide(tracked(nodes, others + preempting(2, record)), {}, NOW, state=state)) \
        == {"train": "a"}

