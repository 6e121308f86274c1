"""bench.peers' pod journal: one line per change a half-placed gang can be read back
from, and none for a sight that changed nothing it keeps."""

from __future__ import annotations

from typing import Any

import orjson

from bench.peers.journal import Journal
from bench.peers.manifests import ATTEMPT_LABEL, JOB_LABEL
from bench.peers.recording import Recorder
from bench.peers.rejudging import rejudge
from webhook.sandbox.nodes import Shape
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import Job


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


GANG = Job("llm", 0.0, "ml", "training", 2, 8, 100.0)
SPEED = 10.0


def _seen(name: str, *, node: str | None = None, phase: str = "Pending",
          refused: bool = False, deleting: bool = False) -> dict[str, Any]:
    attempt = "1" if "-r1-" in name else "0"
    meta: dict[str, Any] = {"namespace": "ml", "name": name,
                            "labels": {JOB_LABEL: "llm", ATTEMPT_LABEL: attempt}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T00:00:00Z"
    status: dict[str, Any] = {"phase": phase}
    if refused:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable", "message": "0/4 nodes"}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


# (replay seconds, the pod as the watch shows it): one pod bound while its sibling is
# refused for 3 s, the gang run whole, evicted with its pods going 0.3 s apart, then run
# again to its end.
WATCHED = [
    (1.0, _seen("llm-0", node="n1")), (1.0, _seen("llm-1", refused=True)),
    (4.0, _seen("llm-1", node="n2")),
    (6.0, _seen("llm-0", node="n1", phase="Running", deleting=True)),
    (6.3, _seen("llm-1", node="n2", phase="Running", deleting=True)),
    (7.0, _seen("llm-r1-0", node="n1")), (7.0, _seen("llm-r1-1", node="n2")),
    (9.0, _seen("llm-r1-0", node="n1", phase="Succeeded")),
    (9.0, _seen("llm-r1-1", node="n2", phase="Succeeded")),
]


def test_a_run_judged_again_from_its_journal_has_the_figures_its_watch_gave() -> None:
    watched, journal = Recorder([GANG], 8, 32, SPEED), Journal()
    entries = []
    for now, pod in WATCHED:
        watched.observe(now, pod)
        line = journal.line(now * SPEED, 1000.0 + now, pod, deleted=False)
        if line is not None:
            entries.append(orjson.loads(line))
    again = rejudge([GANG], entries, Shape(nodes=4, gpus_per_node=8), {}, SPEED)
    figures = summarize(watched.timelines(9.0), 32)
    keys = ("utilization", "partialGangGpuSeconds", "drainingGpuSeconds", "lostGpuSeconds")
    assert {k: again[k] for k in keys} == {k: figures[k] for k in keys}
    # Half-placed: llm-0 alone for 3 s; draining: llm-1 for 0.3 s after the eviction.
    assert (again["partialGangGpuSeconds"], again["drainingGpuSeconds"]) == \
        (8 * 3 * SPEED, round(8 * 0.3 * SPEED))
