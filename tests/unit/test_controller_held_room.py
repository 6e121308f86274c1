"""Room held for a preemptor whose victims are gone: it is admitted there first, and what
it holds is given back once it is admitted, so that no other unit of the round preempts
for room that is free."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import pytest

from tests.builders import (
    CLIQUE,
    NOW,
    TRAINING,
    cluster,
    gang,
    preempting,
    preempts,
    running,
    tracked,
    two_victims_record,
    uid_of,
)
from webhook.controller.core.actions import Action, Admit
from webhook.controller.core.deciding import decide
from webhook.controller.core.records import PreemptionRecord

# Its victims (gone now) ran on a-n0 and a-n1, in domain a.
RECORD = two_victims_record(NOW - 5)


def admitted(actions: Sequence[Action]) -> dict[str, list[str]]:
    """The nodes each admitted unit's pods are planned on, by unit name."""
    return {a.unit.name: sorted(n for _, n in a.record.nodes)
            for a in actions if isinstance(a, Admit)}


def test_a_preemptor_takes_the_room_its_victims_freed_and_leaves_the_rest_to_others() -> None:
    # Domain b freed meanwhile and is the tighter fit; had the preemptor taken it, the room
    # held in a would be kept from `other` for the round.
    nodes = cluster({"a": 3, "b": 2})
    train = preempting(2, RECORD)
    other = gang("other", 2, priority=TRAINING, ns="ml")
    actions = decide(tracked(nodes, train + other), {}, NOW)
    assert admitted(actions) == {"train": ["a-n0", "a-n1"], "other": ["b-n0", "b-n1"]}
    assert preempts(actions) == []


def test_a_preemptor_whose_room_was_taken_goes_elsewhere_and_gives_its_room_back() -> None:
    # A pod of higher priority took a-n0 and a-n1 (kube-scheduler's own preemption): the
    # preemptor fits in b only, and a-n2, held for it, is free for `one`.
    nodes = cluster({"a": 3, "b": 2})
    taken = running("serving", ["a-n0", "a-n1"], ran=60, priority=TRAINING * 2)
    train = preempting(2, RECORD)
    one = gang("one", 1, priority=TRAINING, ns="ml")
    actions = decide(tracked(nodes, taken + train + one), {}, NOW)
    assert admitted(actions) == {"train": ["b-n0", "b-n1"], "one": ["a-n2"]}
    assert preempts(actions) == []


def test_room_held_for_another_preemptor_stays_held() -> None:
    # Two preemptors, each with its room: `second`, decided first, does not take a,
    # though a comes first among the rooms that fit it.
    nodes = cluster({"a": 2, "b": 2})
    second = preempting(2, dataclasses.replace(RECORD, domain="b", nodes=("b-n0", "b-n1")),
                        name="second")
    train = preempting(2, RECORD)
    actions = decide(tracked(nodes, second + train), {}, NOW)
    assert admitted(actions) == {"second": ["b-n0", "b-n1"], "train": ["a-n0", "a-n1"]}


def test_two_preemptors_in_one_domain_each_hold_only_the_nodes_planned_for_them() -> None:
    # `one` made room on a-n2 in the same domain: had each held the whole domain, each
    # would keep the other out, and both wait with the room free (shaped.jsonl, simulated:
    # 40 GPUs idle for the hold's 300 s, then the same scavengers evicted again).
    nodes = cluster({"a": 3})
    one = preempting(1, PreemptionRecord("a", CLIQUE, ("ml/t-0",), ("a-n2",), NOW - 5,
                                         (uid_of("ml", "t-0"),)), name="one")
    train = preempting(2, RECORD)
    actions = decide(tracked(nodes, one + train), {}, NOW)
    assert admitted(actions) == {"one": ["a-n2"], "train": ["a-n0", "a-n1"]}
    assert preempts(actions) == []


@pytest.mark.parametrize(("planned", "lands"), [
    # As the controller records it: the nodes its plan named, and a-n2 is free for `one`.
    (("a-n0", "a-n1"), "a-n2"),
    # A record an older controller wrote, naming no nodes: its domain is all that says
    # where the room is, so the whole of it stays held.
    ((), "b-n0"),
], ids=["nodes-named", "older-record"])
def test_a_preemptor_waiting_for_its_victims_holds_its_planned_nodes(
        planned: tuple[str, ...], lands: str) -> None:
    nodes = cluster({"a": 3, "b": 1})
    going = [dataclasses.replace(p, deleting=True) for p in running("s", ["a-n0", "a-n1"])]
    train = preempting(2, dataclasses.replace(RECORD, nodes=planned))
    one = gang("one", 1, priority=TRAINING, ns="ml")
    actions = decide(tracked(nodes, going + train + one), {}, NOW)
    assert admitted(actions) == {"one": [lands]}
