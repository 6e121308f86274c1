"""Nominated nodes, decided in the pure core: a preemptor's pods are nominated to the
room its victims free before they go, so kube-scheduler keeps that room from pods of no
higher priority; a unit whose hold ended forgets them, or is nominated anew where it goes."""

from __future__ import annotations

import dataclasses

import pytest

from tests.builders import (
    HOUR,
    NOW,
    TRAINING,
    cluster,
    gang,
    pod,
    preempting,
    preempts,
    raw_member,
    running,
    tracked,
    two_victims_record,
    unit,
)
from webhook.controller.core.actions import Admit, Wait
from webhook.controller.core.deciding import DecideOptions, QueueState, decide
from webhook.controller.core.placement.pins import PinMode
from webhook.controller.core.pods import PodInfo

RECORD = two_victims_record(NOW - 5)


def nominated(pods: list[PodInfo], *nodes: str) -> list[PodInfo]:
    """`pods`, each nominated to the node of its place in `nodes`."""
    return [dataclasses.replace(p, nominated=n) for p, n in zip(pods, nodes, strict=True)]


def test_a_preemptor_is_nominated_to_the_room_its_victims_free() -> None:
    nodes = cluster({"a": 2, "b": 2})
    kept = running("kept", ["b-n0", "b-n1"], ran=10 * HOUR)
    cheap = running("cheap", ["a-n0", "a-n1"], ran=HOUR)
    (action,) = preempts(decide(tracked(nodes, kept + cheap + gang(
        "train", 2, priority=TRAINING)), {}, NOW))
    assert {p.name for v in action.victims for p in v.pods} == {"cheap-0", "cheap-1"}
    assert {name for name, _ in action.nominate} == {"train-0", "train-1"}
    assert sorted(node for _, node in action.nominate) == ["a-n0", "a-n1"]


def test_a_unit_keeps_its_nominations_while_its_room_is_held() -> None:
    nodes = cluster({"a": 2})
    going = [dataclasses.replace(p, deleting=True) for p in running("s", ["a-n0", "a-n1"])]
    train = nominated(preempting(2, RECORD), "a-n0", "a-n1")
    (mine,) = [a for a in decide(tracked(nodes, going + train), {}, NOW)
               if a.unit == unit("train")]
    assert isinstance(mine, Wait)  # for its victims to be gone
    assert mine.unnominate == ()


def test_a_unit_forgets_its_nominations_once_its_hold_ends_unused() -> None:
    # The hold timed out, and a gang of higher priority took the room since.
    nodes = cluster({"a": 2})
    busy = running("busy", ["a-n0", "a-n1"], ran=HOUR, priority=TRAINING * 2)
    train = nominated(preempting(2, dataclasses.replace(RECORD, at=NOW - HOUR)),
                      "a-n0", "a-n1")
    (mine,) = [a for a in decide(tracked(nodes, busy + train), {}, NOW)
               if a.unit == unit("train")]
    assert isinstance(mine, Wait)
    assert {p.name for p in mine.unnominate} == {"train-0", "train-1"}


def test_a_unit_without_nominations_has_none_to_forget() -> None:
    nodes = cluster({"a": 1})
    actions = decide(tracked(nodes, running("s", ["a-n0"], ran=HOUR, priority=TRAINING * 2)
                             + gang("train", 1, priority=TRAINING)), {}, NOW)
    (mine,) = [a for a in actions if a.unit == unit("train")]
    assert isinstance(mine, Wait)
    assert mine.unnominate == ()


def test_a_unit_nominated_for_an_ended_hold_is_nominated_where_it_now_goes() -> None:
    # Its hold on b ended; a is free now. Left nominated to b, kube-scheduler would try b.
    nodes = cluster({"a": 2, "b": 2})
    train = nominated(preempting(2, dataclasses.replace(RECORD, at=NOW - HOUR)),
                      "b-n0", "b-n1")
    blocked = running("busy", ["b-n0", "b-n1"], ran=HOUR, priority=TRAINING * 2)
    actions = decide(tracked(nodes, blocked + train), {}, NOW, state=QueueState())
    (mine,) = [a for a in actions if a.unit == unit("train")]
    assert isinstance(mine, Admit)
    assert {name for name, _ in mine.nominate} == {"train-0", "train-1"}
    assert sorted(node for _, node in mine.nominate) == ["a-n0", "a-n1"]


def test_a_preemptor_already_nominated_to_its_nodes_is_not_nominated_again() -> None:
    # Its victims are gone; its pods carry the nominations written at the preemption.
    nodes = cluster({"a": 2})
    train = nominated(preempting(2, RECORD), "a-n0", "a-n1")
    (mine,) = [a for a in decide(tracked(nodes, train), {}, NOW) if a.unit == unit("train")]
    assert isinstance(mine, Admit)
    assert mine.nominate == ()


def test_a_pinned_gang_admitted_without_a_hold_or_nominations_is_not_nominated() -> None:
    nodes = cluster({"a": 2})
    (mine,) = [a for a in decide(tracked(nodes, gang("train", 2, priority=TRAINING,
                                                     owned=True)), {}, NOW)
               if a.unit == unit("train")]
    assert isinstance(mine, Admit)
    assert mine.nominate == ()


@pytest.mark.parametrize(("pin", "nominated"), [("nodes", True), ("domain", False)])
def test_a_steered_pod_is_nominated_to_its_planned_node(pin: PinMode, nominated: bool
                                                        ) -> None:
    # No owner makes these pods again: they prefer their node, and kube-scheduler takes a
    # nominated node that fits before it scores any (with `--pin domain` none is planned).
    nodes = cluster({"a": 2})
    actions = decide(tracked(nodes, gang("train", 2, gpus=4, priority=TRAINING)), {}, NOW,
                     options=DecideOptions(pin=pin))
    (mine,) = [a for a in actions if a.unit == unit("train")]
    assert isinstance(mine, Admit)
    assert mine.nominate == (tuple(sorted(mine.record.nodes)) if nominated else ())
    assert len({node for _, node in mine.nominate}) == (1 if nominated else 0), "packed"


@pytest.mark.parametrize(("gated", "status", "read"), [
    (True, {"nominatedNodeName": "a-n0"}, "a-n0"),
    (True, {}, None),
    (True, {"nominatedNodeName": ""}, None),
    (True, {"nominatedNodeName": ["a-n0"]}, None),  # not a string: not read, never raised
    # Ungated, kube-scheduler's own: not Airlock's to keep or forget.
    (False, {"nominatedNodeName": "a-n0"}, None),
])
def test_only_a_gated_pods_nominated_node_is_read(
        gated: bool, status: dict[str, object], read: str | None) -> None:
    raw = raw_member("train", 0, 8, 1, gated=gated)
    raw["status"] = status
    assert PodInfo.parse(raw).nominated == read


# --- kube-scheduler's own nominations, of pods Airlock does not decide -----------------

def serving(node: str | None = None, nominated_to: str | None = None,
            gpus: int = 8) -> PodInfo:
    """A serving pod, not gated (the shipped policy): bound to `node`, or pending with
    kube-scheduler's nomination to `nominated_to` after its own preemption."""
    raw = pod("web-0", "serving").gpus(gpus).build()
    if node:
        raw["spec"]["nodeName"] = node
    if nominated_to:
        raw["status"] = {"phase": "Pending", "nominatedNodeName": nominated_to}
    return PodInfo.parse(raw)


def _planned(pods: list[PodInfo]) -> str | None:
    nodes = cluster({"a": 2})
    (admit,) = [a for a in decide(tracked(nodes, pods), {}, NOW, DecideOptions())
                if isinstance(a, Admit)]
    return admit.record.node_of("g-0")


def test_room_kube_scheduler_nominated_a_serving_pod_to_is_not_planned_for_a_gang() -> None:
    """kube-scheduler binds a nominated pod where it nominated it, before any pod of
    lower priority: a gang planned there would find its node taken."""
    member = PodInfo.parse(raw_member("g", 0, 8, 1, owned=True))
    assert _planned([member]) == "a-n0"
    assert _planned([serving(nominated_to="a-n0"), member]) == "a-n1"


def test_a_nomination_moves_with_the_pod_and_goes_when_it_binds_or_leaves() -> None:
    nodes = cluster({"a": 2})
    cluster_now = tracked(nodes, [serving(nominated_to="a-n0")])
    assert cluster_now.capacity.free_gpu["a-n0"] == 0
    cluster_now.put_pod(serving(nominated_to="a-n1"))
    assert (cluster_now.capacity.free_gpu["a-n0"], cluster_now.capacity.free_gpu["a-n1"]) \
        == (8, 0)
    cluster_now.put_pod(serving(node="a-n1", nominated_to="a-n1"))  # bound where nominated
    assert cluster_now.capacity.free_gpu["a-n1"] == 0
    cluster_now.drop_pod(serving().key)
    assert cluster_now.capacity.free_gpu["a-n1"] == 8


def test_a_gated_pods_nomination_is_airlocks_own_and_takes_no_room() -> None:
    """The preemption record holds a preemptor's room; its nomination is only the word
    to kube-scheduler."""
    nodes = cluster({"a": 2})
    (gated_pod,) = nominated(gang("train", 1, priority=TRAINING), "a-n0")
    assert tracked(nodes, [gated_pod]).capacity.free_gpu["a-n0"] == 8
