"""bench.peers's prediction error for the real Airlock run: each job's first predicted
start, read from the controller's annotation on its pods as the pod watch showed it
(a small recorded watch, replayed at 10 trace seconds per real second, its clock zero
at 2027-01-15T08:00:00Z), against when the job really started; the figures those of
`airlock simulate --predictions`."""

from __future__ import annotations

import json

from bench.peers.recording import Recorder
from bench.peers.reporting import markdown
from tests.builders import run_summary
from tests.paths import ROOT
from webhook.simulation.forecasts import accuracy
from webhook.simulation.traces import Job

WATCH = ROOT / "tests" / "unit" / "testdata" / "peers" / "predicted-starts.jsonl"
JOBS = [Job("llm", 0.0, "ml", "training", 2, 8, 1000.0),
        Job("bert", 0.0, "ml", "training", 1, 8, 1000.0),
        Job("web", 0.0, "ml", "inference", 1, 8, 1000.0)]


def _replayed() -> Recorder:
    recorder = Recorder(JOBS, gpus_per_node=8, capacity=32, speed=10)
    recorder.epoch = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    for line in WATCH.read_text().splitlines():
        event = json.loads(line)
        recorder.observe(event["at"], event["object"], deleted=event["type"] == "DELETED")
    return recorder


def test_each_job_keeps_its_first_known_prediction_in_trace_seconds() -> None:
    by_name = {t.name: t for t in _replayed().timelines(end=100.0)}
    # llm: "unknown" first, then 08:01:10 (70 real s after zero: 700 trace s); started
    # at 80 real s. bert: 08:00:30 first, moved to 08:00:50 later (not kept).
    assert [(n, t.predicted, t.unknown_first, t.started) for n, t in sorted(by_name.items())] \
        == [("bert", 300.0, False, 600.0), ("llm", 700.0, True, 800.0),
            ("web", 50.0, False, 100.0)]


def test_the_error_over_the_jobs_that_waited_long() -> None:
    # web waited 100 trace s (< 5 min): left out. llm was 100 s off of a wait of 800 s
    # (within 25%), bert 300 s of 600 s (not).
    assert accuracy(_replayed().timelines(end=100.0)) == {
        "waitedLong": 2, "predicted": 2, "unknownFirst": 1, "medianErrorSeconds": 200.0,
        "medianErrorShareOfWait": 0.312, "withinShare": 0.5}


def test_the_table_shows_airlocks_prediction_error_beside_the_others() -> None:
    airlock = run_summary(predictions=accuracy(_replayed().timelines(end=100.0)))
    table = markdown({"stock": [run_summary()], "airlock": [airlock]}, None)
    assert "| predicted start error p50 | - | 200 s |" in table
    assert "| ... p50 as a share of the wait | - | 31% |" in table
    assert "| ... within ±25% (or ±60 s) | - | 50% |" in table
