"""The dashboard's cluster map (`mapping.cluster_map`): nodes grouped by block, then NVLink
domain; each GPU free or held by a class and a unit; the head's kept room marked; the
units running, with their domain and expected end."""

from __future__ import annotations

import dataclasses

import pytest

from tests.builders import (
    BLOCK,
    CLIQUE,
    HOUR,
    NOW,
    blocks,
    gang,
    iso,
    node,
    running,
    single,
    tracked,
    unit,
    with_marks,
)
from webhook.controller.core.identities import UnitId
from webhook.controller.core.mapping import ClusterMap, cluster_map, grouping
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.keys import CLASS_LABEL

LEVELS = {"nvlink": CLIQUE, "block": BLOCK, "host": "kubernetes.io/hostname"}


def of_class(cls: str, pods: list[PodInfo]) -> list[PodInfo]:
    return [dataclasses.replace(p, labels={**p.labels, CLASS_LABEL: cls}) for p in pods]


def drawn(nodes: list[NodeInfo], pods: list[PodInfo],
          reservation: tuple[UnitId, str] | None = None) -> ClusterMap:
    return cluster_map(tracked(nodes, pods), LEVELS, reservation, lambda ns: f"q-{ns}")


def letters(found: ClusterMap) -> dict[str, str]:
    """Each node's GPUs as letters: `.` free, else the class's first letter (`?`: none),
    and `*` after a node in the kept room."""
    return {n.name: "".join("." if g.pod is None else (g.cls or "?")[0] for g in n.cells)
            + ("*" if n.reserved else "")
            for group in found.groups for n in group.nodes}


TWO_DOMAINS = blocks(1, domains=2, nodes=2, gpus=4)  # b0d0-n0, b0d0-n1, b0d1-n0, b0d1-n1

CELLS = [
    ("empty", [], None,
     {"b0d0-n0": "....", "b0d0-n1": "....", "b0d1-n0": "....", "b0d1-n1": "...."}),
    ("a training gang on one domain",
     of_class("training", running("train", ["b0d0-n0", "b0d0-n1"], gpus=4)), None,
     {"b0d0-n0": "tttt", "b0d0-n1": "tttt", "b0d1-n0": "....", "b0d1-n1": "...."}),
    ("a plain pod and a scavenger sharing a node",
     [single("notebook", "b0d1-n0", gpus=1),
      *of_class("scavenger", running("scav", ["b0d1-n0"], gpus=2))], None,
     {"b0d0-n0": "....", "b0d0-n1": "....", "b0d1-n0": "ss?.", "b0d1-n1": "...."}),
    ("the head's domain kept",
     gang("head", 2, gpus=4), (unit("head"), "b0d1"),
     {"b0d0-n0": "....", "b0d0-n1": "....", "b0d1-n0": "....*", "b0d1-n1": "....*"}),
    ("a head without a topology keeps no marked room",
     [with_marks(p, topology_key=None) for p in gang("head", 2, gpus=4)],
     (unit("head"), "b0d1"),
     {"b0d0-n0": "....", "b0d0-n1": "....", "b0d1-n0": "....", "b0d1-n1": "...."}),
]


@pytest.mark.parametrize(("case", "pods", "reservation", "expected"), CELLS,
                         ids=[c[0] for c in CELLS])
def test_each_gpu_is_free_or_held_by_a_class(case: str, pods: list[PodInfo],
                                             reservation: tuple[UnitId, str] | None,
                                             expected: dict[str, str]) -> None:
    found = drawn(TWO_DOMAINS, pods, reservation)
    assert letters(found) == expected, case
    assert found.head == (None if reservation is None else f"ml/{reservation[0].name}")


def test_nodes_are_grouped_by_block_then_nvlink_domain() -> None:
    nodes = [*blocks(2, domains=2, nodes=1, gpus=8), node("cpu-0", None, gpus=0),
             node("loose-0", None, gpus=8)]
    pods = of_class("training", running("train", ["b1d0-n0"], gpus=8))
    found = drawn(nodes, pods)
    assert found.levels == ("block", "nvlink")
    assert [(g.domains, [n.name for n in g.nodes], g.gpus, g.free) for g in found.groups] == [
        ((("block", ""), ("nvlink", "")), ["loose-0"], 8.0, 8.0),
        ((("block", "b0"), ("nvlink", "b0d0")), ["b0d0-n0"], 8.0, 8.0),
        ((("block", "b0"), ("nvlink", "b0d1")), ["b0d1-n0"], 8.0, 8.0),
        ((("block", "b1"), ("nvlink", "b1d0")), ["b1d0-n0"], 8.0, 0.0),
        ((("block", "b1"), ("nvlink", "b1d1")), ["b1d1-n0"], 8.0, 8.0)]


GROUPINGS = [
    ("host never groups", {"host": "kubernetes.io/hostname"}, ()),
    ("fewest domains first", {"nvlink": CLIQUE, "block": BLOCK}, ("block", "nvlink")),
    ("ties by name", {"zeta": BLOCK, "alpha": BLOCK}, ("alpha", "zeta")),
    ("a level no node has groups nothing", {"nvlink": CLIQUE, "rack": "example.com/rack"},
     ("nvlink",)),
]


@pytest.mark.parametrize(("case", "levels", "expected"), GROUPINGS,
                         ids=[c[0] for c in GROUPINGS])
def test_grouping_levels(case: str, levels: dict[str, str], expected: tuple[str, ...]
                         ) -> None:
    found = grouping(levels, (n.labels for n in blocks(2, domains=2, nodes=1)))
    assert tuple(name for name, _ in found) == expected, case


RUNNING = [
    ("a stated run time gives the end",
     [with_marks(p, runtime=2 * HOUR) for p in
      of_class("training", running("train", ["b0d0-n0", "b0d0-n1"], gpus=4))],
     ("ml/train", "q-ml", "training", 2, 8.0, "nvlink b0d0", iso(NOW - HOUR), iso(NOW + HOUR))),
    ("no run time, no end",
     of_class("scavenger", running("scav", ["b0d1-n0"], gpus=2)),
     ("ml/scav", "q-ml", "scavenger", 1, 2.0, "nvlink b0d1", iso(NOW - HOUR), None)),
    ("a gang over two domains names both",
     of_class("training", running("wide", ["b0d0-n0", "b0d1-n0"], gpus=4)),
     ("ml/wide", "q-ml", "training", 2, 8.0, "nvlink b0d0, b0d1", iso(NOW - HOUR), None)),
    ("a queued single pod, by its narrowest grouping level",
     [single("solo", "b0d0-n1", gpus=1, queued=True)],
     ("pod ml/solo", "q-ml", "", 1, 1.0, "nvlink b0d0", iso(NOW - HOUR), None)),
]


@pytest.mark.parametrize(("case", "pods", "expected"), RUNNING, ids=[c[0] for c in RUNNING])
def test_running_units_say_their_domain_and_end(case: str, pods: list[PodInfo],
                                                expected: tuple[object, ...]) -> None:
    (line,) = drawn(TWO_DOMAINS, pods).running
    assert dataclasses.astuple(line) == expected, case


def test_pods_outside_airlock_are_drawn_but_not_listed_as_running() -> None:
    found = drawn(TWO_DOMAINS, [single("notebook", "b0d0-n0", gpus=3)])
    assert found.running == ()
    (cells,) = [n.cells for g in found.groups for n in g.nodes if n.name == "b0d0-n0"]
    assert [c.pod for c in cells] == ["ml/notebook"] * 3 + [None]
    assert found.as_json()["groups"][0]["nodes"][0]["cells"][0] == {
        "pod": "ml/notebook", "unit": None, "cls": None}
