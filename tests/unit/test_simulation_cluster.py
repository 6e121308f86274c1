"""The simulated kube-scheduler's choice of node: its NodeResourcesFit scoring, and the
nodes a pod's affinity keeps it off."""

from __future__ import annotations

import pytest

from webhook.simulation.clusters import Cluster, Resident, Shape

# Three nodes of 8 GPUs in one domain: node 0 has 4 free, node 1 has 6, node 2 is empty.
DOMAIN = ("nvidia.com/gpu.clique", "domain-0000")


def _cluster(scoring: str) -> Cluster:
    c = Cluster(Shape(nodes=3, nodes_per_domain=3, scoring=scoring), [DOMAIN[0]],
                "nvidia.com/gpu", [0, 100])
    c.bind(0, ("ml", "a"), Resident(0, 4, 0.0))
    c.bind(1, ("ml", "b"), Resident(0, 2, 0.0))
    return c


# scoring, pinned to the domain, nodes fenced off -> the node a 2-GPU pod is bound to
CASES: list[tuple[str, str, bool, frozenset[int], int | None]] = [
    ("bin-packing takes the fullest that fits", "MostAllocated", False, frozenset(), 0),
    ("the default takes the emptiest", "LeastAllocated", False, frozenset(), 2),
    ("the same inside a pinned domain", "LeastAllocated", True, frozenset(), 2),
    ("bin-packing in a pinned domain", "MostAllocated", True, frozenset(), 0),
    ("never a node fenced off", "MostAllocated", False, frozenset({0}), 1),
    ("nor in a pinned domain", "LeastAllocated", True, frozenset({2}), 1),
    ("none left", "LeastAllocated", False, frozenset({0, 1, 2}), None),
]


@pytest.mark.parametrize(("scoring", "pinned", "off", "node"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_the_node_a_pod_is_bound_to(scoring: str, pinned: bool, off: frozenset[int],
                                    node: int | None) -> None:
    assert _cluster(scoring).pick(2, DOMAIN if pinned else None, off) == node


@pytest.mark.parametrize("pinned", [False, True])
def test_preemption_never_takes_a_node_kept_off(pinned: bool) -> None:
    c = _cluster("MostAllocated")
    c.bind(2, ("ml", "c"), Resident(0, 8, 0.0))
    # 8 GPUs at priority 100: every node would do by evicting; node 0 is kept off.
    found = c.victims(8, 100, DOMAIN if pinned else None, frozenset({0}))
    assert found is not None
    assert found[0] != 0
    assert c.victims(8, 100, DOMAIN if pinned else None, frozenset({0, 1, 2})) is None
