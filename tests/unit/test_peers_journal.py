"""bench.peers' pod journal: one line per change a half-placed gang can be read back
from, and none for a sight that changed nothing it keeps."""

from __future__ import annotations

from typing import Any

import orjson

from bench.peers.journal import Journal


def _pod(*, gated: bool = False, node: str | None = None, phase: str = "Pending",
         refused: str | None = None, fence: list[str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"nodeSelector": {"clique": "clique-2"}}
    if gated:
        spec["schedulingGates"] = [{"name": "gpu-airlock.io/admission"}]
    if node:
        spec["nodeName"] = node
    if fence:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "NotIn", "values": fence}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "preference": {
                "matchFields": [{"key": "metadata.name", "operator": "In",
                                 "values": ["gpu-0004"]}]}}]}}
    status: dict[str, Any] = {"phase": phase}
    if refused:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": refused}]
    return {"metadata": {"namespace": "team-a", "name": "train-0"}, "spec": spec,
            "status": status}


def _lines(sights: list[tuple[dict[str, Any], bool]]) -> list[dict[str, Any]]:
    journal = Journal()
    found = [journal.line(float(i), 1000.0 + i, pod, deleted)
             for i, (pod, deleted) in enumerate(sights)]
    return [orjson.loads(line) for line in found if line is not None]


def test_a_pod_let_go_refused_then_bound_is_read_back_with_its_fence() -> None:
    lines = _lines([(_pod(gated=True), False), (_pod(gated=True), False),
                    (_pod(fence=["gpu-0003"]), False),
                    (_pod(fence=["gpu-0003"], refused="0/16 nodes are available"), False),
                    (_pod(fence=["gpu-0003"], node="gpu-0004"), False),
                    (_pod(fence=["gpu-0003"], node="gpu-0004"), True)])
    assert [(e["gated"], e["node"]) for e in lines] == [
        (True, None), (False, None), (False, None), (False, "gpu-0004"), (False, "gpu-0004")]
    assert lines[1]["nodeNames"] == ["NotIn:gpu-0003", "Prefer:gpu-0004"]
    assert lines[1]["nodeSelector"] == {"clique": "clique-2"}
    assert "nodeNames" not in lines[2]
    assert "nodeNames" not in lines[0]
    assert lines[2]["unschedulable"] == "0/16 nodes are available"
    assert lines[-1]["gone"] is True
    assert lines[0]["t"] == 0.0
    assert lines[0]["at"] == 1000.0
