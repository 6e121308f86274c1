"""Backfill that never delays the head: the head's expected start (shadow time), the run
times learned and kept for the next leader, gangs let onto the head's room only when they
end in time, and a backfill that overran as the head's first victim."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import (
    HOUR,
    NOW,
    TRAINING,
    admitted,
    cluster,
    gang,
    iso,
    label,
    member,
    preempts,
    raw_queued,
    running,
    single,
    told,
    tracked,
    unit,
    waits,
    with_marks,
    with_records,
)
from webhook.controller.core.actions import Wait
from webhook.controller.core.deciding import Admit, DecideOptions, Record, decide
from webhook.controller.core.gangs import gang_of
from webhook.controller.core.placement.backfill import shadow, spare
from webhook.controller.core.placement.runtimes import LEAST, WINDOW, Runtimes
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.accounting import Accounts
from webhook.controller.core.queues.order import queue_order
from webhook.controller.core.queues.queueing import QueueState
from webhook.controller.core.records import dump_memory
from webhook.controller.core.reporting import report
from webhook.keys import (
    GANG_EXPECTED_MIN_ANNOTATION,
    QUEUED_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
)
from webhook.policy.model import Policy

# --- the head's expected start -------------------------------------------------------

# need, (pods, smallest), free per node, (end, node, GPUs) of pods running there -> start
SHADOWS: list[tuple[str, int, tuple[int, int], dict[str, int], list[Any], float | None]] = [
    ("room now", 8, (1, 8), {"n0": 8}, [], NOW),
    ("the soonest end that frees enough", 16, (2, 8), {"n0": 8, "n1": 0},
     [(NOW + 900, "n1", 8), (NOW + 300, "n1", 8)], NOW + 300),
    ("enough in all, but not on one node", 8, (1, 8), {"n0": 4, "n1": 4},
     [(NOW + 100, "n0", 2), (NOW + 200, "n1", 4)], NOW + 200),
    ("an unknown end before enough frees", 16, (2, 8), {"n0": 8, "n1": 0},
     [(None, "n1", 8), (NOW + 300, "n0", 0)], None),
    ("an unknown end after enough freed", 16, (2, 8), {"n0": 8, "n1": 0},
     [(None, "n0", 8), (NOW + 300, "n1", 8)], NOW + 300),
    ("never enough", 32, (4, 8), {"n0": 8}, [(NOW + 60, "n0", 8)], None),
    ("past its end: now at the soonest", 8, (1, 8), {"n0": 0},
     [(NOW - 60, "n0", 8)], NOW),
]


@pytest.mark.parametrize(("need", "shape", "free", "ends", "start"),
                         [case[1:] for case in SHADOWS], ids=[case[0] for case in SHADOWS])
def test_shadow_time(need: int, shape: tuple[int, int], free: dict[str, int],
                     ends: list[Any], start: float | None) -> None:
    found = shadow(need, shape, free, ends, NOW)
    assert (found.at if found else None) == start


# room at the shadow time, the head's pod sizes -> the nodes it would leave alone
SPARES: list[tuple[str, dict[str, int], list[int], frozenset[str]]] = [
    ("a node too small for any pod", {"n0": 8, "n1": 4, "n2": 8}, [8, 8], frozenset({"n1"})),
    ("pods packed onto the roomiest nodes", {"n0": 8, "n1": 8, "n2": 8}, [4, 4],
     frozenset({"n1", "n2"})),
    ("every node needed", {"n0": 8, "n1": 8}, [8, 8], frozenset()),
    ("ties go by name", {"n1": 8, "n0": 8}, [8], frozenset({"n1"})),
    ("does not pack: nothing is spare", {"n0": 8, "n1": 4}, [8, 8], frozenset()),
]


@pytest.mark.parametrize(("room", "sizes", "left"), [c[1:] for c in SPARES],
                         ids=[c[0] for c in SPARES])
def test_the_nodes_the_head_would_not_need_at_its_start(
        room: dict[str, int], sizes: list[int], left: frozenset[str]) -> None:
    assert spare(room, sizes) == left


def _a_head_that_spares_a_node(behind: list[PodInfo]) -> list[PodInfo]:
    """Domain a (5 nodes): a-n0 busy for 600 s more, a-n1 half busy for as long as
    nobody knows, three nodes free; b full. The head (4 pods of 8 GPUs) keeps a and
    starts there in 600 s on a-n0, a-n2, a-n3 and a-n4: a-n1's free half it never
    needs."""
    busy = _stating(running("busy", ["a-n0"], ran=600, priority=TRAINING), 1200)
    half = running("half", ["a-n1"], gpus=4, ran=600, priority=TRAINING)
    full = running("full", [f"b-n{i}" for i in range(4)], ran=600, priority=TRAINING)
    return [*busy, *half, *full, *gang("head", 4, priority=10, created=1), *behind]


@pytest.mark.parametrize(("gpus", "lent"), [(4, True), (8, False)])
def test_room_the_head_would_not_need_even_at_its_start_is_lent_for_any_run_time(
        gpus: int, lent: bool) -> None:
    """EASY's second rule: the gang behind states no run time, so the first rule lends
    it nothing; a-n1's 4 free GPUs are the head's to spare, an 8-GPU pod's room is not."""
    pods = _a_head_that_spares_a_node(gang("small", 1, gpus=gpus, created=2))
    actions = decide(tracked(cluster({"a": 5, "b": 4}), pods), {}, NOW,
                     DecideOptions(order="backfill"))
    if not lent:
        assert "small" not in admitted(actions)
        return
    assert admitted(actions) == {"small": "a"}
    (record,) = [a.record for a in actions if isinstance(a, Admit)]
    assert record.backfilled_until is None  # no promise to end: never an overrun victim
    assert record.fenced_off == ("a-n0", "a-n2", "a-n3", "a-n4")


# --- run times learned ---------------------------------------------------------------

ESTIMATES: list[tuple[str, list[float], float | None]] = [
    ("nothing seen", [], None),
    ("fewer runs than trusted", [600.0] * (LEAST - 1), None),
    ("enough: the longest", [300.0, 900.0, 600.0, 100.0, 200.0], 900.0),
    ("past the window: the oldest forgotten",
     [10_000.0] + [float(s) for s in range(1, WINDOW + 1)], float(WINDOW)),
]


@pytest.mark.parametrize(("runs", "estimate"), [case[1:] for case in ESTIMATES],
                         ids=[case[0] for case in ESTIMATES])
def test_learned_estimate(runs: list[float], estimate: float | None) -> None:
    runtimes = Runtimes()
    for seconds in runs:
        runtimes = runtimes.learned(("team-a", "training"), seconds)
    assert runtimes.estimate(("team-a", "training")) == estimate
    assert runtimes.estimate(("team-b", "training")) is None


def test_a_stated_run_time_comes_before_a_learned_one() -> None:
    runtimes = _learned(600.0)
    stated = _stating(gang("g", 2), 60)
    assert runtimes.expected(stated) == 60
    assert runtimes.expected(gang("g", 2)) == 600.0


def test_what_runs_take_of_the_time_they_state_is_learned_for_forecasts_only() -> None:
    """Runs that state a time teach the share of it they take (their namespace and
    class's own); backfill still promises with the time stated, a forecast shortens it."""
    runtimes = Runtimes()
    for seconds in (500.0, 600.0, 800.0, 900.0):
        runtimes = runtimes.learned(("ml", ""), seconds, stated=1000.0)
    runtimes = runtimes.learned(("ml", ""), 4000.0)  # stated nothing: no ratio
    stated = _stating(gang("g", 2), 2000)
    assert runtimes.typical(stated) == 2000  # four ratios: not trusted yet
    runtimes = runtimes.learned(("ml", ""), 700.0, stated=1000.0)
    assert runtimes.ratios[("ml", "")] == (0.5, 0.6, 0.8, 0.9, 0.7)
    assert runtimes.typical(stated) == 1400.0
    assert runtimes.expected(stated) == 2000
    assert runtimes.typical(_stating(gang("g", 2, ns="other"), 2000)) == 2000
    # A unit stating nothing: the median of the run times, those that stated one too.
    assert runtimes.typical(gang("g", 2)) == 750.0


def test_the_ratios_are_kept_and_an_earlier_memory_without_them_still_reads() -> None:
    runtimes = Runtimes()
    for seconds in (300.0, 600.0):
        runtimes = runtimes.learned(("ml", "a"), seconds, stated=600.0)
    runtimes = runtimes.learned(("ml", "b"), 60.0)
    assert Runtimes.loads(runtimes.dumps()) == runtimes
    earlier = dump_memory("runtimes", {"seen": [{"namespace": "ml", "class": "a",
                                                  "seconds": [300.0]}]})
    assert Runtimes.loads(earlier) == Runtimes({("ml", "a"): (300.0,)})


def _learned(seconds: float) -> Runtimes:
    """Enough runs of namespace ml, of pods of no class, to trust: all `seconds`."""
    runtimes = Runtimes()
    for _ in range(LEAST):
        runtimes = runtimes.learned(("ml", ""), seconds)
    return runtimes


def _done(pods: list[PodInfo]) -> list[PodInfo]:
    return [dataclasses.replace(p, terminal=True, succeeded=True) for p in pods]


def _admitted(name: str, at: float, nodes: list[str]) -> list[PodInfo]:
    record = Record(None, None, tuple(f"{name}-{i}" for i in range(len(nodes))), at,
                    len(nodes))
    return [member(name, i, size=len(nodes), gated=False, node_name=n,
                   placement=record if i == 0 else None) for i, n in enumerate(nodes)]


def test_run_times_are_learned_from_gangs_that_succeed_and_kept(policy: Policy) -> None:
    ok, failed = _admitted("ok", NOW - 1000, ["n0", "n1"]), _admitted("bad", NOW - 50, ["n2"])
    former = Accounts()
    former.sample(policy, tracked(cluster({"a": 3}), ok + failed), NOW)
    # `ok` succeeded; `bad` failed (its pods gone): only `ok` says how long work runs.
    former.sample(policy, tracked(cluster({"a": 3}), _done(ok)), NOW + 10)
    key = ("ml", "")
    assert former.runtimes.seen[key] == (1010.0,)
    assert former.runtimes.ratios == {}
    leader = Accounts()
    leader.carry_on(policy, former.memory(), NOW + 20)
    assert leader.runtimes == former.runtimes
    # What was never kept, or is not readable, is learned afresh.
    afresh = Accounts()
    afresh.carry_on(policy, {"runtimes": "not json"}, NOW + 20)
    assert afresh.runtimes.seen == {}


def test_a_gang_stating_its_run_time_teaches_what_share_of_it_runs_take(
        policy: Policy) -> None:
    ok = _stating(_admitted("ok", NOW - 1000, ["n0", "n1"]), 2020)
    former = Accounts()
    former.sample(policy, tracked(cluster({"a": 2}), ok), NOW)
    former.sample(policy, tracked(cluster({"a": 2}), _done(ok)), NOW + 10)
    assert former.runtimes.ratios[("ml", "")] == (0.5,)
    leader = Accounts()
    leader.carry_on(policy, former.memory(), NOW + 20)
    assert leader.runtimes.ratios == former.runtimes.ratios


def test_run_times_are_learned_from_queued_single_pods_too(policy: Policy) -> None:
    record = Record(None, None, ("one",), NOW - 500, 1)
    one = with_records(single("one", "a-n0", queued=True), placement=record)
    accounts = Accounts()
    accounts.sample(policy, tracked(cluster({"a": 1}), [one]), NOW)
    accounts.sample(policy, tracked(cluster({"a": 1}), _done([one])), NOW + 10)
    assert accounts.runtimes.seen[("ml", "")] == (510.0,)
    stating = with_marks(one, runtime=1020)
    accounts = Accounts()
    accounts.sample(policy, tracked(cluster({"a": 1}), [stating]), NOW)
    accounts.sample(policy, tracked(cluster({"a": 1}), _done([stating])), NOW + 10)
    assert accounts.runtimes.ratios[("ml", "")] == (0.5,)


def test_what_one_namespace_teaches_moves_no_other_namespaces_estimate(
        policy: Policy) -> None:
    """Twenty jobs that exit at once in one namespace teach about nothing of another
    namespace of the same queue: its gangs are not backfilled on a 15-second estimate
    and evicted as overruns."""
    accounts = Accounts()
    quick = [_admitted(f"q{i}", NOW - 15, [f"n{i}"]) for i in range(WINDOW)]
    mallory = [dataclasses.replace(p, namespace="mallory") for pods in quick for p in pods]
    accounts.sample(policy, tracked(cluster({"a": WINDOW}), mallory), NOW)
    accounts.sample(policy, tracked(cluster({"a": WINDOW}), _done(mallory)), NOW + 1)
    assert accounts.runtimes.estimate(("mallory", "")) == 16.0
    assert accounts.runtimes.estimate(("ml", "")) is None
    assert accounts.runtimes.expected(gang("g", 2)) is None


def test_a_new_leader_learns_nothing_from_what_finished_before_it_led(policy: Policy) -> None:
    leader = Accounts()
    leader.sample(policy, tracked(cluster({"a": 2}), _done(_admitted("ok", NOW - 10 * HOUR,
                                                                      ["n0", "n1"]))), NOW)
    assert leader.runtimes.seen == {}


# --- who may use the head's room ---------------------------------------------------------

def _stating(pods: list[PodInfo], seconds: float) -> list[PodInfo]:
    return [with_marks(p, runtime=seconds) for p in pods]


def _cluster_for_a_head(ends_in: float | None) -> list[PodInfo]:
    """Domain a: one node busy until `ends_in` from now (None: nobody knows), three free;
    domain b full, for as long as nobody knows. The head (4 pods of 8 GPUs, one domain)
    keeps a, and could start there when the busy node frees."""
    busy = running("busy", ["a-n0"], ran=600, priority=TRAINING)
    if ends_in is not None:
        busy = _stating(busy, 600 + ends_in)
    full = running("full", [f"b-n{i}" for i in range(4)], ran=600, priority=TRAINING)
    return [*busy, *full, *gang("head", 4, priority=10, created=1)]


# behind the head: its stated run time (None: none), the busy node's end -> backfilled?
BEHIND: list[tuple[str, float | None, float | None, bool]] = [
    ("ends before the head could start", 300, 600, True),
    ("ends as the head could start", 600, 600, True),
    ("would delay the head", 900, 600, False),
    ("no run time known", None, 600, False),
    ("the head's start unknown", 300, None, False),
]


@pytest.mark.parametrize(("runtime", "ends_in", "backfilled"), [c[1:] for c in BEHIND],
                         ids=[c[0] for c in BEHIND])
def test_a_gang_behind_the_head_uses_its_room_only_when_it_ends_in_time(
        runtime: float | None, ends_in: float | None, backfilled: bool) -> None:
    small = gang("small", 1, created=2)
    if runtime is not None:
        small = _stating(small, runtime)
    actions = decide(tracked(cluster({"a": 4, "b": 4}), _cluster_for_a_head(ends_in) + small),
                     {}, NOW, DecideOptions(order="backfill"))
    admits = [a for a in actions if isinstance(a, Admit)]
    if backfilled:
        assert admitted(actions) == {"small": "a"}
        assert admits[0].record.backfilled_until == NOW + (runtime or 0)
    else:
        assert not admits
        assert waits(actions)["small"].startswith("Waiting: 1/1 pods present; needs 8 GPUs")


def test_a_learned_run_time_lets_a_gang_backfill() -> None:
    small = gang("small", 1, created=2)
    state = QueueState(runtimes=_learned(300.0))
    actions = decide(tracked(cluster({"a": 4, "b": 4}), _cluster_for_a_head(600) + small),
                     {}, NOW, DecideOptions(order="backfill"), state)
    assert admitted(actions) == {"small": "a"}


def test_what_a_backfill_takes_does_not_move_the_heads_start() -> None:
    # The first backfill takes a free node of a; judged again from what is free after
    # it, the head's start would be later and let the second, longer one in too.
    first = _stating(gang("first", 1, created=2), 500)
    second = _stating(gang("second", 1, created=3), 700)
    pods = _cluster_for_a_head(600) + first + second
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW,
                     DecideOptions(order="backfill"))
    assert admitted(actions) == {"first": "a"}


def test_a_gang_that_fits_elsewhere_is_not_backfilled() -> None:
    pods = [*running("busy", ["a-n0"], ran=600, priority=TRAINING),
            *gang("head", 4, priority=10, created=1), *_stating(gang("small", 1, created=2), 60)]
    actions = decide(tracked(cluster({"a": 4, "b": 1}), pods), {}, NOW)
    assert admitted(actions) == {"small": "b"}
    assert not next(a for a in actions if isinstance(a, Admit)).record.backfilled_until


def test_an_elastic_gang_backfills_as_if_it_ran_at_its_minimums_pace() -> None:
    # 2 pods, minimum 1, 200 s at full size: up to 400 s with one pod, past the head's
    # start in 300 s, so not onto its room; stated 100 s, it is.
    def elastic(seconds: float) -> list[PodInfo]:
        return _stating([member("el", i, size=2, created=2, marks={
            GANG_EXPECTED_MIN_ANNOTATION: "1"}) for i in range(2)], seconds)
    for seconds, lets in ((200, False), (100, True)):
        actions = decide(tracked(cluster({"a": 4, "b": 4}),
                                 _cluster_for_a_head(300) + elastic(seconds)), {}, NOW)
        assert ("el" in admitted(actions)) is lets


def test_a_gang_behind_the_head_never_evicts_to_take_its_room() -> None:
    # The head (which may not preempt) keeps a, where a low pod runs 300 s more. The gang
    # behind would end in time, but its 4 pods fit a only by evicting that pod: room
    # reserved for the head is lent, never taken by eviction. b is full of its equals.
    top = TRAINING + 1
    busy = _stating(running("busy", ["a-n0"], ran=600, priority=0), 900)
    full = _stating(running("full", [f"b-n{i}" for i in range(4)], ran=600, priority=top),
                    HOUR)
    head = gang("head", 4, priority=top, created=1, preemptionPolicy="Never")
    behind = _stating(gang("behind", 4, priority=top, created=2), 60)
    actions = decide(tracked(cluster({"a": 4, "b": 4}), [*busy, *full, *head, *behind]),
                     {}, NOW)
    assert not preempts(actions)
    assert not admitted(actions)


def test_the_head_keeps_the_domain_kept_for_it_while_that_could_hold_it() -> None:
    # a has 2 free nodes and b 3: b has more, but a was reserved for the head last round.
    pods = [*running("a-busy", ["a-n0", "a-n1"], priority=TRAINING),
            *running("b-busy", ["b-n0"], priority=TRAINING),
            *gang("head", 4, priority=10, created=1)]
    cluster_ = tracked(cluster({"a": 4, "b": 4}), pods)
    for kept, domain in ((None, "b"), ((unit("head"), "a"), "a")):
        actions = decide(cluster_, {}, NOW, state=QueueState(reservation=kept))
        (wait,) = [a for a in actions if isinstance(a, Wait) and a.unit == unit("head")]
        assert wait.reserves == domain


def test_the_last_head_stays_first_among_gangs_of_its_priority() -> None:
    early, late = gang_of(unit("early"), gang("early", 1, created=1)), \
        gang_of(unit("late"), gang("late", 1, created=2))
    assert [g.id for g in queue_order([late, early])] == [unit("early"), unit("late")]
    assert [g.id for g in queue_order([late, early], head=unit("late"))] == \
        [unit("late"), unit("early")]


# --- a backfill that overran ---------------------------------------------------------------

def _backfilled(until: float) -> list[PodInfo]:
    """Gang `late` of one pod, of a high priority, on a-n0 for two minutes (younger than
    the minimum runtime), backfilled until `until`."""
    record = Record("a", "topology", ("late-0",), NOW - 120, 1, backfilled_until=until)
    pod = running("late", ["a-n0"], ran=120, priority=TRAINING)[0]
    return [with_records(pod, placement=record)]


def _head_and_a_cheaper_victim(until: float) -> list[PodInfo]:
    """a-n0: the backfill; a-n1: an old pod of a low priority, a cheaper victim by every
    other rule; a-n2..3 free. The head needs three nodes of a."""
    return [*_backfilled(until), *running("cheap", ["a-n1"], ran=HOUR, priority=0),
            *gang("head", 3, priority=10, created=1)]


def test_a_backfill_that_overran_is_the_heads_first_victim() -> None:
    actions = decide(tracked(cluster({"a": 4}), _head_and_a_cheaper_victim(NOW - 600)),
                     {}, NOW)
    (preempt,) = preempts(actions)
    assert [(v.unit, v.cause) for v in preempt.victims] == [(unit("late"), "backfill")]
    message = told(preempt)
    assert message.startswith("Preempted: it was backfilled onto the room reserved for the "
                              "first in the queue until ")
    assert "and overran that by 10 min; evicted to make room for gang ml/head" in message


def test_a_backfill_within_its_time_is_not_a_victim_out_of_turn() -> None:
    actions = decide(tracked(cluster({"a": 4}), _head_and_a_cheaper_victim(NOW + 600)),
                     {}, NOW)
    (preempt,) = preempts(actions)
    assert [(v.unit, v.cause) for v in preempt.victims] == [(unit("cheap"), "priority")]


def test_only_the_head_evicts_a_backfill_that_overran_out_of_turn() -> None:
    # The head may not preempt (its class says Never), so it only waits, keeping a; the
    # gang behind it may preempt, but it is not the head, and the backfill outranks it.
    head = gang("head", 2, priority=10, created=1, preemptionPolicy="Never")
    behind = gang("behind", 1, priority=10, created=2)
    actions = decide(tracked(cluster({"a": 2}), [*_backfilled(NOW - 600), *head, *behind]),
                     {}, NOW)
    assert not preempts(actions)
    assert set(waits(actions)) == {"head", "behind"}


def test_status_shows_what_was_backfilled_and_whether_it_overran(policy: Policy) -> None:
    pods = [*_backfilled(NOW - 600), *running("other", ["a-n1"])]
    found = report(policy, tracked(cluster({"a": 2}), pods), [], NOW, {})
    assert found.as_json()["backfilled"] == [
        {"gang": "ml/late", "queue": "default", "until": iso(NOW - 600), "overran": True}]
    assert f"ml/late  queue default: expected to end {iso(NOW - 600)}, overran" in \
        found.text()
    on_time = report(policy, tracked(cluster({"a": 2}), _backfilled(NOW + 600)), [], NOW, {})
    assert not on_time.as_json()["backfilled"][0]["overran"]


def test_a_bound_single_pod_keeps_the_run_time_it_stated() -> None:
    # Once bound, a single pod is no gang's and no queue's to decide: its run time still
    # tells when the head's room frees.
    raw = raw_queued("one", gated=False, marks={RUNTIME_SECONDS_ANNOTATION: "600"},
                     nodeName="a-n0")
    assert PodInfo.parse(raw).marks.runtime == 600


@pytest.mark.parametrize("value", ["²", "٣", "-5", "1e3", ""])
def test_a_run_time_that_is_not_plain_digits_is_no_run_time(value: str) -> None:
    raw = raw_queued("one", gated=False, marks={RUNTIME_SECONDS_ANNOTATION: value})
    assert PodInfo.parse(raw).marks.runtime is None


def test_a_pod_airlock_did_not_mark_states_no_run_time() -> None:
    raw = raw_queued("one", gated=False, marks={RUNTIME_SECONDS_ANNOTATION: "600"},
                     nodeName="a-n0")
    del raw["metadata"]["annotations"][QUEUED_ANNOTATION]
    assert PodInfo.parse(raw).marks.runtime is None


@pytest.mark.parametrize(("spared", "backfilled"), [(frozenset(), True),
                                                    (frozenset({"gpu-operator"}), False)])
def test_a_run_time_out_of_airlocks_scope_does_not_move_the_heads_start(
        spared: frozenset[str], backfilled: bool) -> None:
    """The busy node's pod states it ends in 600 s; in a namespace out of Airlock's scope
    the webhook never saw it, so that is nobody's word but its creator's: the head's
    start is unknown, and nothing is let onto its room."""
    busy = _stating(running("busy", ["a-n0"], ran=600, priority=TRAINING,
                            ns="gpu-operator"), 1200)
    full = running("full", [f"b-n{i}" for i in range(4)], ran=600, priority=TRAINING)
    small = _stating(gang("small", 1, created=2), 300)
    pods = [*busy, *full, *gang("head", 4, priority=10, created=1), *small]
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW,
                     DecideOptions(order="backfill"), QueueState(spared=spared))
    assert ("small" in admitted(actions)) is backfilled


@pytest.mark.parametrize(("pods", "backfilled"), [(6, True), (4, False)],
                         ids=["head bigger than any domain", "head that one domain holds"])
def test_a_preferred_head_keeps_no_domain_it_could_never_start_in(
        pods: int, backfilled: bool) -> None:
    """Domains of 4 nodes of 8 GPUs; what runs ends nobody knows when, so room kept for
    the head is lent to nobody. A preferred head of 6 pods will run across domains, so
    keeping its best domain would only idle it; one of 4 could start there."""
    busy = [*running("busy", ["a-n0"], ran=600, priority=TRAINING),
            *running("full", [f"b-n{i}" for i in range(4)], ran=600, priority=TRAINING)]
    pods_ = [*busy, *gang("head", pods, priority=10, created=1, mode="preferred"),
             *gang("small", 1, created=2)]
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods_), {}, NOW,
                     DecideOptions(order="backfill"))
    head = next(a for a in actions if isinstance(a, Wait) and label(a.unit) == "head")
    # Either way it stays the head, first next round.
    assert head.reserves == "a"
    if backfilled:
        assert admitted(actions) == {"small": "a"}
        assert "more than one nvidia.com/gpu.clique domain holds, so it will run across " \
            in head.message
        # No domain could ever hold it, so nothing is moved out of one for it.
        assert head.reason == "NoRoom"
    else:
        assert not admitted(actions)
        assert "in one nvidia.com/gpu.clique domain, the best has 24 free" in head.message
        assert head.reason == "NoDomainFits"
