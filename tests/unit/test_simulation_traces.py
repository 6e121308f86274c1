"""Traces: what a line must hold, and where a bad one is."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import GPU_MODELS
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.simulation.generating import Mix, generate
from webhook.simulation.traces import (
    Job,
    TraceError,
    airlock_annotations,
    check_models,
    dump_trace,
    parse_trace,
    read_trace,
)

GOOD = ('{"name": "a", "submit": 5, "namespace": "ml", "class": "training", "pods": 2, '
        '"gpus": 8, "runtime": 60}')


def test_a_good_trace_in_submit_order_skipping_blanks_and_comments() -> None:
    later = GOOD.replace('"submit": 5', '"submit": 9').replace('"a"', '"b"')
    jobs = parse_trace([later, "", "# a comment", GOOD], "t.jsonl")
    assert [j.name for j in jobs] == ["a", "b"]
    assert jobs[0] == Job("a", 5.0, "ml", "training", 2, 8, 60.0)


@pytest.mark.parametrize(("line", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "a job is a JSON object"),
    (GOOD.replace('"pods": 2, ', ""), "missing pods"),
    (GOOD.replace('"pods": 2', '"pods": 2, "gpu": 1'), "unknown field(s) gpu"),
    (GOOD.replace('"training"', '"batch"'), "class 'batch' is not one of"),
    (GOOD.replace('"runtime": 60', '"runtime": 0'), "runtime must be a number of seconds"),
    (GOOD.replace('"submit": 5', '"submit": -1'), "submit must be a number of seconds"),
    (GOOD.replace('"pods": 2', '"pods": 1.5'), "pods must be a whole number"),
    (GOOD.replace('"gpus": 8', '"gpus": true'), "gpus must be a whole number"),
    (GOOD.replace('"ml"', '"ML"'), "namespace 'ML' must be lowercase"),
    (GOOD.replace('"pods": 2', '"pods": 2, "minPods": 2'), "minPods must be fewer than pods"),
    (GOOD.replace('"pods": 2', '"pods": 2, "sliceSize": 1'),
     "sliceTopology and sliceSize go together"),
    (GOOD.replace('"pods": 2', '"pods": 2, "expectedRuntime": 0'),
     "expectedRuntime must be a number of seconds, more than 0"),
    (GOOD.replace('"pods": 2', '"pods": 2, "gpuModels": "h100"'), "gpuModels must be a list"),
    (GOOD.replace('"pods": 2', '"pods": 2, "gpuModels": []'), "gpuModels must be a list"),
    (GOOD.replace('"pods": 2', '"pods": 2, "gpuModels": ["H100"]'), "gpuModels must be a list"),
    (GOOD.replace('"pods": 2', '"pods": 2, "gpuModels": ["l4", "l4"]'),
     "gpuModels names a model twice"),
])
def test_a_bad_line_fails_with_file_and_line(line: str, message: str) -> None:
    with pytest.raises(TraceError) as e:
        parse_trace([GOOD.replace('"a"', '"first"'), "", line], "jobs.jsonl")
    assert str(e.value).startswith("jobs.jsonl:3: ")
    assert message in str(e.value)


def test_a_name_twice_in_a_namespace_names_both_lines() -> None:
    with pytest.raises(TraceError, match=r"t:2: job ml/a is already on line 1"):
        parse_trace([GOOD, GOOD], "t")


def test_read_trace_reports_the_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text(GOOD + "\n" + '{"name": "b"}\n')
    with pytest.raises(TraceError, match=rf"^{path}:2: missing "):
        read_trace(path)
    with pytest.raises(TraceError, match="cannot read the trace"):
        read_trace(tmp_path / "absent.jsonl")


def test_the_generator_is_deterministic_and_its_trace_reads_back(tmp_path: Path) -> None:
    mix = Mix(jobs=300, seed=11, max_pods=16)
    first, again = generate(mix), generate(mix)
    assert first == again
    assert generate(Mix(jobs=300, seed=12)) != first
    path = tmp_path / "g.jsonl"
    path.write_text("".join(dump_trace(first)))
    assert read_trace(path) == first
    classes = {j.cls for j in first}
    assert classes == {"training", "inference", "scavenger"}
    assert max(j.pods for j in first) <= 16
    assert any(j.pods > 1 for j in first if j.cls == "training")


def test_the_generator_command_writes_the_same_trace_for_the_same_seed(tmp_path: Path
                                                                       ) -> None:
    from webhook.simulation.generating import main

    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    for path in (a, b):
        assert main(["--jobs", "50", "--seed", "3", "--mix", "training=1,scavenger=1",
                     "-o", str(path)]) == 0
    assert a.read_text() == b.read_text()
    assert {j.cls for j in read_trace(a)} == {"training", "scavenger"}


def test_the_shapes_of_a_mix_leave_its_jobs_as_they_were_and_read_back() -> None:
    base = generate(Mix(jobs=200, seed=3))
    shaped = generate(Mix(jobs=200, seed=3, elastic=0.5, sliced=0.5, stated=0.5))
    plain = [Job(j.name, j.submit, j.namespace, j.cls, j.pods, j.gpus, j.runtime)
             for j in shaped]
    assert plain == base
    elastic = [j for j in shaped if j.min_pods is not None]
    sliced = [j for j in shaped if j.slice_size is not None]
    assert elastic
    assert sliced
    assert any(j.expected_runtime for j in shaped)
    assert all(j.min_pods == j.pods // 2 for j in elastic)
    assert all(j.pods >= 4 and j.required_topology == "block" for j in sliced)
    assert all(j.runtime <= (j.expected_runtime or j.runtime) <= 1.5 * j.runtime + 1
               for j in shaped)
    assert parse_trace(dump_trace(shaped), "shaped.jsonl") == shaped


def test_gpu_models_read_back_in_order_and_become_the_pods_annotation() -> None:
    line = GOOD.replace('"pods": 2', '"pods": 2, "gpuModels": ["h100", "a100"]')
    job, = parse_trace(["", line], "t")
    assert (job.gpu_models, job.line) == (("h100", "a100"), 2)
    assert parse_trace([job.to_json()], "t") == [job]
    assert airlock_annotations(job)[GPU_MODELS_ANNOTATION] == "h100,a100"


def test_a_job_naming_a_model_the_policy_lacks_fails_at_its_line() -> None:
    jobs = parse_trace([GOOD, "# h200s", GOOD.replace('"a"', '"b"').replace(
        '"pods": 2', '"pods": 2, "gpuModels": ["h100", "h200"]')], "t.jsonl")
    check_models(jobs[:1], GPU_MODELS, "t.jsonl")
    with pytest.raises(TraceError) as e:
        check_models(jobs, GPU_MODELS, "t.jsonl")
    assert str(e.value) == ("t.jsonl:3: job ml/b: gpuModels names 'h200', which the policy "
                            "does not define; the models on offer: h100, a100, l4")
