"""Pods no owner makes again are steered, not pinned: the plan's node is recorded for them
and preferred at ungate (a preferred node affinity at the most weight, which outweighs
kube-scheduler's spreading), their fence kept, and their room held on that node while
they are let go but not bound; a pin would strand them if the node failed, with nothing
to make them again."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import CLIQUE, NOW, SEAL, cluster, let_go, raw_member, running, tracked
from webhook.controller.core.deciding import Admit, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import Record
from webhook.controller.shells.patches import ungate_patch

NODES = cluster({"a": 4})
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
OWN_TERM = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": ["h100"]}]}
OWN_PREFERENCE = {"weight": 5, "preference": {"matchExpressions": [
    {"key": "zone", "operator": "In", "values": ["z1"]}]}}


def _ours(node: str) -> dict[str, Any]:
    return {"weight": 100, "preference": {"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}}


def _fence(*nodes: str) -> list[dict[str, Any]]:
    return [{"key": "metadata.name", "operator": "NotIn", "values": [n]} for n in nodes]


# The pod's own affinity, and the node affinity it has once let go (planned on a-n1,
# fenced off a-n2).
SHAPES: list[tuple[str, dict[str, Any] | None, dict[str, Any]]] = [
    ("none", None,
     {PREFERRED: [_ours("a-n1")], REQUIRED: {"nodeSelectorTerms": [
         {"matchFields": _fence("a-n2")}]}}),
    ("pod affinity only", {"podAffinity": {}},
     {PREFERRED: [_ours("a-n1")], REQUIRED: {"nodeSelectorTerms": [
         {"matchFields": _fence("a-n2")}]}}),
    ("its own preference", {"nodeAffinity": {PREFERRED: [OWN_PREFERENCE]}},
     {PREFERRED: [OWN_PREFERENCE, _ours("a-n1")], REQUIRED: {"nodeSelectorTerms": [
         {"matchFields": _fence("a-n2")}]}}),
    ("its own required term", {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [OWN_TERM]}}},
     {PREFERRED: [_ours("a-n1")], REQUIRED: {"nodeSelectorTerms": [
         {**OWN_TERM, "matchFields": _fence("a-n2")}]}}),
]


@pytest.mark.parametrize(("affinity", "expected"), [s[1:] for s in SHAPES],
                         ids=[s[0] for s in SHAPES])
def test_a_pod_without_an_owner_prefers_its_planned_node_and_keeps_its_fence(
        affinity: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    raw = raw_member("g", 0, 4, 1)
    if affinity is not None:
        raw["spec"]["affinity"] = affinity
    record = Record("a", CLIQUE, ("g-0",), NOW, 1, nodes=(("g-0", "a-n1"),),
                    fenced_off=("a-n2",))
    out = jsonpatch.apply_patch(raw, ungate_patch(PodInfo.parse(raw, SEAL), record))
    assert out["spec"]["affinity"]["nodeAffinity"] == expected
    assert PodInfo.parse(out, SEAL).constraints.pinned is None, "preferred, not pinned"


def test_a_pod_with_an_owner_is_still_pinned_and_not_fenced() -> None:
    raw = raw_member("g", 0, 4, 1, owned=True)
    record = Record("a", CLIQUE, ("g-0",), NOW, 1, nodes=(("g-0", "a-n1"),),
                    fenced_off=("a-n2",))
    out = jsonpatch.apply_patch(raw, ungate_patch(PodInfo.parse(raw, SEAL), record))
    assert PREFERRED not in out["spec"]["affinity"]["nodeAffinity"]
    assert PodInfo.parse(out, SEAL).constraints.pinned == "a-n1"


def _admit(actions: list[Any]) -> Admit:
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    return admit


def test_a_steered_pod_let_go_keeps_its_room_on_its_planned_node() -> None:
    """Gang g, one 4-GPU pod without an owner, is planned on a-n0 (best fit beside a pod
    that leaves a-n2 3 GPUs) and let go. A pod then takes half of a-n1, which best fit
    would now choose for g-0: its room stays on a-n0, where it is steered, and an 8-GPU
    pod is planned on the one node left whole, a-n3, not on a-n0, where the scheduler
    will bind g-0."""
    busy = running("busy", ["a-n2"], gpus=5)
    raw = raw_member("g", 0, 4, 1)
    record = _admit(decide(tracked(NODES, [*busy, PodInfo.parse(raw, SEAL)]), {}, NOW)).record
    assert dict(record.nodes) == {"g-0": "a-n0"}
    g0 = let_go(raw, record, anchor=True)
    half = running("half", ["a-n1"], gpus=4)
    newcomer = PodInfo.parse(raw_member("h", 0, 8, 1), SEAL)
    admit = _admit(decide(tracked(NODES, [*busy, *half, g0, newcomer]), {}, NOW + 1))
    assert admit.record.node_of("h-0") == "a-n3"
