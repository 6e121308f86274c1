"""The demo's waits and table: the moment every pod runs and every Job has finished, and
each pod's STATUS."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.keys import GATE
from webhook.sandbox.showing import WITH_OPERATORS, WITHOUT_OPERATORS, demo_pods, phase, settled


def pod_in(phase: str, node: str | None = "gpu-0000") -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"nodeName": node} if node else {},
            "status": {"phase": phase}}


def job(condition: str | None) -> dict[str, Any]:
    conditions = [{"type": condition, "status": "True"}] if condition else []
    return {"status": {"conditions": conditions}}


@pytest.mark.parametrize(("pods", "jobs", "ready"), [
    ([], [], False),
    ([pod_in("Running")], [], True),
    ([pod_in("Running"), pod_in("Pending", None)], [], False),
    ([pod_in("Pending")], [], False),  # bound, not yet started by KWOK
    ([pod_in("Running")], [job(None)], False),
    ([pod_in("Succeeded")], [job("Complete")], True),
    ([pod_in("Failed")], [job("Failed")], True),
])
def test_the_table_waits_until_pods_run_and_jobs_finish(
        pods: list[dict[str, Any]], jobs: list[dict[str, Any]], ready: bool) -> None:
    assert settled(pods, jobs) is ready


def test_the_table_waits_for_every_pod_the_demo_makes() -> None:
    # The Deployment's 2 replicas and the Job's 1 pod can settle before the
    # training-operator has made the PyTorchJob's 1 master and 3 workers.
    assert (demo_pods(WITHOUT_OPERATORS), demo_pods(WITH_OPERATORS), demo_pods()) == (3, 4, 7)
    three = [pod_in("Running"), pod_in("Running"), pod_in("Succeeded")]
    assert not settled(three, [job("Complete")], demo_pods())
    assert settled(three * 3, [job("Complete")], demo_pods())


def test_status_says_gated_terminating_or_the_phase() -> None:
    gated = pod_in("Pending", None)
    gated["spec"]["schedulingGates"] = [{"name": GATE}]
    leaving = pod_in("Running")
    leaving["metadata"]["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    assert [phase(p) for p in (gated, leaving, pod_in("Succeeded"))] == \
        ["SchedulingGated", "Terminating", "Succeeded"]
    assert phase({"metadata": {}, "spec": {}}) == "Pending"
