"""bench.peers judges whether a gang's pods, bound together, kept the topology its trace
requires: the block of all of them, the NVLink domain of each slice."""

from __future__ import annotations

from typing import Any

import pytest

from bench.peers.manifests import ATTEMPT_LABEL, JOB_LABEL
from bench.peers.recording import Recorder
from bench.peers.topologies import broken
from webhook.simulation.traces import Job

LEVELS = {"block": "block", "nvlink": "clique"}
# Two blocks, each of two NVLink domains of one node; n4 has no labels at all.
NODES = {f"n{i}": {"block": f"b{i // 2}", "clique": f"c{i}"} for i in range(4)} | {"n4": {}}
SLICED = Job("sl", 0.0, "ml", "training", 4, 8, 100.0, required_topology="block",
             slice_topology="nvlink", slice_size=2)


@pytest.mark.parametrize(("placed", "said"), [
    ({0: "n0", 1: "n0", 2: "n1", 3: "n1"}, None),
    ({0: "n0", 1: "n1", 2: "n0", 3: "n1"}, None),  # no rank: any two in a domain are a slice
    ({0: "n0", 1: "n1"}, None),  # half bound: its slices may yet be whole
    ({0: "n0", 1: "n0", 2: "n1", 3: "n2"}, "its pods in 2 block domains; slices of 2 across "
                                           "nvlink domains (pods per domain: 1, 1, 2)"),
    ({0: "n0", 1: "n0", 2: "n0", 3: "n1"},
     "slices of 2 across nvlink domains (pods per domain: 1, 3)"),
    ({0: "n0", 1: "n0", 2: "n4"}, "its pods in 2 block domains"),  # no label: apart
])
def test_a_placement_is_judged_against_the_block_and_each_slice(
        placed: dict[int, str], said: str | None) -> None:
    assert broken(SLICED, placed, NODES, LEVELS) == said


def test_a_job_that_requires_nothing_breaks_nothing() -> None:
    loose = Job("lo", 0.0, "ml", "training", 2, 8, 100.0)
    assert broken(loose, {0: "n0", 1: "n3"}, NODES, LEVELS) is None


def _sight(name: str, node: str | None = None, gone: bool = False) -> dict[str, Any]:
    attempt = name.split("-r")[1].split("-")[0] if "-r" in name else "0"
    meta: dict[str, Any] = {"namespace": "ml", "name": name,
                            "labels": {JOB_LABEL: "sl", ATTEMPT_LABEL: attempt}}
    if gone:
        meta["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node} if node else {},
            "status": {"phase": "Running" if node else "Pending"}}


def test_the_recorder_tells_the_attempt_whose_pods_bound_together_broke_it() -> None:
    recorder = Recorder([SLICED], 8, 32, 1.0, NODES, LEVELS)
    # Attempt 0: pod 0 preempted before pod 2 binds in the other block: never together.
    recorder.observe(1.0, _sight("sl-0", "n0"))
    recorder.observe(2.0, _sight("sl-0", "n0", gone=True))
    recorder.observe(3.0, _sight("sl-2", "n2"))
    assert recorder.broken_topologies() == {}
    # Attempt 1: in one block, but three pods on one NVLink domain and one on the other.
    for index, node in enumerate(("n0", "n0", "n0")):
        recorder.observe(4.0, _sight(f"sl-r1-{index}", node))
    assert recorder.broken_topologies() == {}
    recorder.observe(5.0, _sight("sl-r1-3", "n1"))
    assert recorder.broken_topologies() == {
        "ml/sl": "attempt 1: slices of 2 across nvlink domains (pods per domain: 1, 3)"}


def test_without_the_nodes_labels_nothing_is_judged() -> None:
    recorder = Recorder([SLICED], 8, 32, 1.0)
    recorder.observe(1.0, _sight("sl-0", "n0"))
    recorder.observe(1.0, _sight("sl-1", "n3"))
    assert recorder.broken_topologies() == {}
