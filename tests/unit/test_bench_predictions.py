"""The predictions bench (`python -m bench.predictions`): each variant tells the forecast
the run times it says, and the error that is left is measured, not assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.predictions.measuring import VARIANTS, main, measure
from webhook.policy.loading import load_policy
from webhook.simulation.traces import Job

POLICY = load_policy(Path(__file__).resolve().parents[2] / "policies")


def _job(name: str, submit: float, pods: int, runtime: float,
         stated: float | None = None) -> Job:
    return Job(name, submit, "team-a", "training", pods, 8, runtime, expected_runtime=stated)


# The default simulated cluster is 16 nodes of 8 GPUs: `full` holds all of it, and
# `behind` waits for its end, which it states as twice what it runs.
FULL = _job("full", 0.0, 16, 1000.0, stated=2000.0)
BEHIND = _job("behind", 10.0, 1, 600.0)


def test_the_variants_change_only_what_they_name() -> None:
    unstated = _job("unstated", 0.0, 1, 300.0)
    told = {name: (f(FULL), f(unstated)) for name, f in VARIANTS.items()}
    assert told["as written"] == (FULL, unstated)
    assert [j.expected_runtime for j in told["stated exact"]] == [1000.0, None]
    assert [j.expected_runtime for j in told["all exact"]] == [1000.0, 300.0]


def test_a_stated_time_twice_the_run_is_the_whole_error_and_exact_leaves_almost_none() -> None:
    found = measure([FULL, BEHIND], POLICY)
    # `behind` waited about 1,000 s and was predicted to start 1,000 s late, then within
    # a round of when it did.
    assert found["as written"]["waitedLong"] == 1
    assert found["as written"]["medianErrorShareOfWait"] > 1.0
    assert found["stated exact"]["medianErrorShareOfWait"] < 0.05
    assert found["all exact"]["medianErrorShareOfWait"] < 0.05


def _written(path: Path, *jobs: Job) -> Path:
    path.write_text("".join(
        f'{{"name": "{j.name}", "submit": {j.submit}, "namespace": "team-a", '
        f'"class": "training", "pods": {j.pods}, "gpus": 8, "runtime": {j.runtime}'
        + (f', "expectedRuntime": {j.expected_runtime}' if j.expected_runtime else "")
        + "}\n" for j in jobs))
    return path


def test_the_table_names_each_trace_and_variant(tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    trace = _written(tmp_path / "t.jsonl", FULL, BEHIND)
    assert main(["--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "| trace | as written | stated exact | all exact |" in out
    row = next(line for line in out.splitlines() if line.startswith("| t.jsonl |"))
    assert row.count("(1/1)") == 3


def test_traces_where_no_gang_waited_long_have_no_median_and_no_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    alone = [str(_written(tmp_path / f"{n}.jsonl", _job(n, 0.0, 1, 60.0))) for n in "ab"]
    assert main(["--trace", alone[0], "--trace", alone[1]]) == 0
    out = capsys.readouterr().out
    assert "| median of the traces | - | - | - |" in out
