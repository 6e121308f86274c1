"""The storm bench's arithmetic on figures written by hand: counters and histograms over
the storm, Airlock's marks on a stored pod, and the failure policy's promises."""

from __future__ import annotations

from typing import Any

import pytest

from bench.common import Moments
from bench.storm.checking import promises
from bench.storm.figures import Errors, counts, plus, since
from bench.storm.storming import Restart, Run, Settings
from bench.storm.workloads import Marks, pods_of, split, storm
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL, GATE

FAIL_OPEN = 'apiserver_admission_webhook_fail_open_count{name="%s",type="%s"} %d\n'


def _pod(classed: bool, gated: bool, gang: bool) -> dict[str, Any]:
    labels = {CLASS_LABEL: "training"} if classed else {}
    if gang:
        labels[GANG_NAME_LABEL] = "g"
    gates = [{"name": GATE}] if gated else []
    return {"metadata": {"labels": labels}, "spec": {"schedulingGates": gates}}


def _run(pods: list[dict[str, Any]]) -> Run:
    run = Run(0.0, pods=[Moments(float(i), p) for i, p in enumerate(pods)], complete=True)
    run.restart = Restart(1, 1.0, 2.0)
    return run


def _settings(policy: str, restart: bool = True) -> Settings:
    return Settings(3, 2, 2, 1, policy, restart, 10.0)


def test_workloads_split_the_pods_between_deployments_and_indexed_jobs() -> None:
    assert split(5, 2) == [2, 2, 1]
    objects = storm("ns", 7, 2, 3)
    # Interleaved, so that sent at a rate both kinds come throughout the storm.
    assert [o["kind"] for o in objects] == ["Deployment", "Job", "Deployment", "Job"]
    assert objects[-1]["spec"]["completionMode"] == "Indexed"
    assert [pods_of(o) for o in objects] == [2, 3, 1, 1]
    assert not any(o["spec"]["template"]["spec"].get("schedulingGates") for o in objects)


def test_the_baselines_gang_members_carry_the_gate_airlock_would_add() -> None:
    jobs = [o for o in storm("ns", 7, 2, 3, gated=True) if o["kind"] == "Job"]
    assert all(j["spec"]["template"]["spec"]["schedulingGates"] == [{"name": GATE}]
               for j in jobs)


@pytest.mark.parametrize(("pod", "state"), [
    (_pod(classed=True, gated=True, gang=True), "marked"),
    (_pod(classed=True, gated=False, gang=False), "marked"),
    (_pod(classed=False, gated=False, gang=True), "unmarked"),
    (_pod(classed=True, gated=False, gang=True), "partial"),
    (_pod(classed=False, gated=True, gang=True), "partial"),
])
def test_marks_on_a_stored_pod(pod: dict[str, Any], state: str) -> None:
    assert Marks.of(pod).state == state


def test_histograms_and_counters_are_taken_over_the_storm() -> None:
    before = {"a": [(0.005, 1.0), (float("inf"), 2.0)], "idle": [(float("inf"), 4.0)]}
    after = {"a": [(0.005, 4.0), (float("inf"), 7.0)], "idle": [(float("inf"), 4.0)]}
    assert since(after, before) == {"a": [(0.005, 3.0), (float("inf"), 5.0)]}
    assert plus(since(after, before), {"a": [(0.005, 1.0), (float("inf"), 1.0)]}) == {
        "a": [(0.005, 4.0), (float("inf"), 6.0)]}
    text = FAIL_OPEN % ("m", "admit", 5) + FAIL_OPEN % ("v", "validating", 2)
    assert counts(text, FAIL_OPEN % ("m", "admit", 1), "apiserver_admission_webhook_"
                  "fail_open_count", ("name",)) == {"m": 4.0, "v": 2.0}


def test_under_ignore_each_unmarked_pod_must_be_a_fail_open() -> None:
    run = _run([_pod(True, False, False), _pod(False, False, False),
                _pod(False, False, False)])
    counted = Errors.between(FAIL_OPEN % ("mutate.gpu-airlock.io", "admit", 3), "")
    short = Errors.between(FAIL_OPEN % ("mutate.gpu-airlock.io", "admit", 1), "")
    assert all(p.held for p in promises(run, _settings("Ignore"), counted))
    assert [p.held for p in promises(run, _settings("Ignore"), short)] == [True, False, True]


def test_under_fail_no_pod_is_stored_unmarked_and_all_are_stored() -> None:
    marked = _run([_pod(True, False, False)] * 3)
    assert all(p.held for p in promises(marked, _settings("Fail"), Errors.between("", "")))
    one_unmarked = _run([_pod(True, False, False)] * 2 + [_pod(False, False, False)])
    one_unmarked.complete = False
    held = [p.held for p in promises(one_unmarked, _settings("Fail"), Errors.between("", ""))]
    assert held == [False, False, True]


def test_without_a_restart_a_failed_call_breaks_the_promise() -> None:
    run = _run([_pod(True, False, False)] * 3)
    failed = Errors.between(FAIL_OPEN % ("validate.gpu-airlock.io", "validating", 1), "")
    assert [p.held for p in promises(run, _settings("Ignore", restart=False), failed)] == [
        True, False, True]
