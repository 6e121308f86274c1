"""Room reserved for the head of the queue is kept from the scheduler too: a gang admitted
elsewhere is pinned off the reserved nodes at ungate, since kube-scheduler would otherwise
spread its pods wherever there is room, the reserved nodes included. So is room promised
to pods let go but not bound yet, which the scheduler cannot see either."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonpatch
import pytest

from tests.builders import (
    CLIQUE,
    NOW,
    TRAINING,
    admitted,
    cluster,
    gang,
    label,
    let_go,
    queued,
    raw_member,
    running,
    tracked,
    with_marks,
)
from webhook.controller.core.cluster.filters import eligible
from webhook.controller.core.deciding import Admit, DecideOptions, Record, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.shells.patches import ungate_patch
from webhook.keys import GANG_LABEL, GATE

# One requirement per node: the apiserver takes one value per `metadata.name` requirement.
OFF = [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in ("a-n1", "a-n2")]
OWN = {"key": "gpu", "operator": "In", "values": ["h100"]}


def _admits(actions: list[Any]) -> dict[str, Record]:
    return {label(a.unit): a.record for a in actions if isinstance(a, Admit)}


def _head_keeping_a(behind: list[PodInfo]) -> list[PodInfo]:
    """Domain a: one node busy for as long as nobody knows, three free; the head (4 pods
    of 8 GPUs, one domain) keeps a; domain b has one free node."""
    return [*running("busy", ["a-n0"], ran=600, priority=TRAINING),
            *gang("head", 4, priority=10, created=1), *behind]


def test_a_pod_admitted_beside_the_heads_room_is_pinned_off_it() -> None:
    """A queued single pod has no domain to be pinned to: the scheduler may put it on
    any node with room, unless told not to."""
    pods = _head_keeping_a([queued("small", 8, priority=5, created=2)])
    actions = decide(tracked(cluster({"a": 4, "b": 1}), pods), {}, NOW)
    assert _admits(actions)["pod/small"].fenced_off == ("a-n0", "a-n1", "a-n2", "a-n3")


def test_a_gang_pinned_to_another_domain_needs_no_more() -> None:
    pods = _head_keeping_a(gang("small", 1, created=2))
    actions = decide(tracked(cluster({"a": 4, "b": 1}), pods), {}, NOW)
    assert admitted(actions) == {"small": "b"}
    assert _admits(actions)["small"].fenced_off == ()


def test_a_gang_let_onto_the_heads_room_is_not_pinned_off_it() -> None:
    small = [with_marks(p, runtime=60.0) for p in gang("small", 1, created=2)]
    busy = [with_marks(p, runtime=1200.0)
            for p in running("busy", ["a-n0"], ran=600, priority=TRAINING)]
    pods = [*busy, *gang("head", 4, priority=10, created=1), *small]
    actions = decide(tracked(cluster({"a": 4}), pods), {}, NOW,
                     DecideOptions(order="backfill"))
    record = _admits(actions)["small"]
    assert record.backfilled_until is not None
    assert record.fenced_off == ()


def test_without_a_head_keeping_room_nothing_is_pinned_off() -> None:
    actions = decide(tracked(cluster({"a": 4}), gang("small", 1)), {}, NOW)
    assert _admits(actions)["small"].fenced_off == ()


def test_the_kept_nodes_are_kept_in_the_sealed_record() -> None:
    record = Record(None, None, ("p",), NOW, fenced_off=("a-n1", "a-n2"))
    assert Record.of(record.body()) == record
    assert Record.of(Record(None, None, ("p",), NOW).body()).fenced_off == ()


# --- room promised to pods not bound yet ------------------------------------------------

def _in_flight(gpus: int) -> PodInfo:
    """One pod of `gpus` GPUs admitted 5 s ago into domain a, let go, not bound yet."""
    record = Record("a", CLIQUE, ("big-0",), NOW - 5, 1)
    return let_go(raw_member("big", 0, gpus, size=1), record, anchor=True)


def test_a_pod_admitted_while_a_gang_binds_is_fenced_off_its_room() -> None:
    """The gang's pod was let go, its 8 GPUs promised on one node of a: to the scheduler
    that node is empty, and its spreading would put the single pod there."""
    actions = decide(tracked(cluster({"a": 2}), [_in_flight(8), queued("small", 8)]), {}, NOW)
    assert len(_admits(actions)["pod/small"].fenced_off) == 1


def test_a_node_with_room_left_beside_the_promise_is_not_fenced() -> None:
    actions = decide(tracked(cluster({"a": 1}), [_in_flight(4), queued("small", 4)]), {}, NOW)
    assert _admits(actions)["pod/small"].fenced_off == ()


def test_units_admitted_in_one_round_are_fenced_off_each_others_room() -> None:
    """The first admitted is fenced off the room of the one admitted after it, too: the
    scheduler binds their pods in no order the round knows."""
    pods = [queued("small", 4, priority=10), *gang("big", 1)]
    records = _admits(decide(tracked(cluster({"a": 2}), pods), {}, NOW))
    small, big = records["pod/small"].fenced_off, records["big"].fenced_off
    assert len(small) == len(big) == 1
    assert {*small, *big} == {"a-n0", "a-n1"}


def test_members_pinned_to_their_nodes_need_no_fence() -> None:
    pods = [dataclasses.replace(queued("small", 4, priority=10), owned=True),
            *(dataclasses.replace(p, owned=True) for p in gang("big", 1))]
    records = _admits(decide(tracked(cluster({"a": 2}), pods), {}, NOW))
    assert [len(r.nodes) for r in records.values()] == [1, 1]
    assert [r.fenced_off for r in records.values()] == [(), ()]


def _pod(affinity: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingGates": [{"name": GATE}]}
    if affinity is not None:
        spec["affinity"] = affinity
    return {"metadata": {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}},
            "spec": spec}


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


PREFERRED = {"preferredDuringSchedulingIgnoredDuringExecution": [
    {"weight": 1, "preference": {"matchExpressions": [OWN]}}]}

# the pod's affinity before -> the required terms after
SHAPES: list[tuple[str, dict[str, Any] | None, list[dict[str, Any]]]] = [
    ("no affinity", None, [{"matchFields": OFF}]),
    ("only pod affinity", {"podAffinity": {}}, [{"matchFields": OFF}]),
    ("only preferred node affinity", {"nodeAffinity": PREFERRED}, [{"matchFields": OFF}]),
    ("one term of expressions", _required({"matchExpressions": [OWN]}),
     [{"matchExpressions": [OWN], "matchFields": OFF}]),
    ("two terms, one with fields", _required(
        {"matchExpressions": [OWN]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a-n1"]}]}),
     [{"matchExpressions": [OWN], "matchFields": OFF},
      {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a-n1"]}, *OFF]}]),
    ("an empty term beside one", _required({}, {"matchExpressions": [OWN]}),
     [{}, {"matchExpressions": [OWN], "matchFields": OFF}]),
]


@pytest.mark.parametrize(("affinity", "terms"), [s[1:] for s in SHAPES],
                         ids=[s[0] for s in SHAPES])
def test_the_ungate_patch_narrows_every_required_term(
        affinity: dict[str, Any] | None, terms: list[dict[str, Any]]) -> None:
    pod = _pod(affinity)
    info = PodInfo.parse(pod)
    out = jsonpatch.apply_patch(pod, ungate_patch(
        info, Record(None, None, ("p",), NOW, fenced_off=("a-n1", "a-n2"))))
    after = out["spec"]["affinity"]
    assert after["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == \
        {"nodeSelectorTerms": terms}
    # What else the pod had stays.
    before = affinity or {}
    assert {k: v for k, v in after.items() if k != "nodeAffinity"} == \
        {k: v for k, v in before.items() if k != "nodeAffinity"}
    if "preferredDuringSchedulingIgnoredDuringExecution" in before.get("nodeAffinity", {}):
        assert after["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == \
            PREFERRED["preferredDuringSchedulingIgnoredDuringExecution"]


def test_a_pod_pinned_off_is_eligible_only_elsewhere() -> None:
    pod = _pod(None)
    out = jsonpatch.apply_patch(pod, ungate_patch(
        PodInfo.parse(pod), Record(None, None, ("p",), NOW, fenced_off=("a-n1", "a-n2"))))
    info = PodInfo.parse(out)
    assert {n.name for n in cluster({"a": 4}) if eligible(info, n)} == {"a-n0", "a-n3"}
