"""bench.peers over repeated replays, without a cluster: each figure's median and spread
over the runs, the table and the JSON they make, the seeded trace family, and `--runs N`
through `main` with the replay itself replaced (the order systems run in, the files)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from matplotlib.image import imread

from bench.peers import family
from bench.peers import measuring as measuring_module
from bench.peers.aggregating import (
    Spread,
    flatten,
    median_run,
    medians,
    spread,
    system_json,
)
from bench.peers.manifests import System
from bench.peers.measuring import main
from bench.peers.replaying import Options, Outcome
from bench.peers.reporting import gap, markdown
from tests.builders import run_summary
from tests.paths import ROOT
from webhook.policy.model import Policy
from webhook.simulation import clusters
from webhook.simulation.simulating import simulate
from webhook.simulation.traces import Job, TraceError, read_trace

TINY = ROOT / "bench" / "traces" / "tiny.jsonl"


def test_a_figure_is_the_median_and_spread_of_the_runs_that_have_it() -> None:
    runs = [run_summary(0.62, p99=300.0, training_mean=None),
            run_summary(0.70, p99=100.0), run_summary(0.66, p99=200.0, training_mean=900.0),
            {"error": "RuntimeError: the probe gang did not run"}]
    figures = spread(runs)
    assert figures["utilization"] == Spread(0.66, 0.62, 0.70, 3)
    assert figures["wait.p99"] == Spread(200.0, 100.0, 300.0, 3)
    # A run without a value is left out of that figure's sample: two runs, their mean.
    assert figures["classes.training.wait.mean"] == Spread(750.0, 600.0, 900.0, 2)
    assert figures["jobs"] == Spread(2, 2, 2, 3)
    assert Spread.of([None, None]) == Spread(None, None, None, 0)


def test_the_figures_are_every_number_but_a_teams_own() -> None:
    flat = flatten(run_summary(stuck=1, flag=True))
    assert flat["stuck"] == 1
    assert flat["classes.training.wait.p50"] == 10.0
    assert "flag" not in flat  # a bool is no figure
    assert not [k for k in flat if k.startswith(("namespaces", "neverRunnableJobs", "ended"))]


def test_medians_take_a_summarys_shape_so_the_gap_reads_them() -> None:
    real = medians(spread([run_summary(0.5, p99=100.0), run_summary(0.7, p99=300.0)]))
    assert real["wait"] == {"p50": 10.0, "p99": 200.0, "mean": 600.0}
    assert real["classes"]["training"]["utilization"] == pytest.approx(0.6)
    assert gap(real, run_summary(0.65, p99=250.0)) == {
        "waitP50": 0.0, "waitP99": 50.0, "utilization": 0.05}


def test_one_replay_keeps_its_shape_and_several_nest_figures_and_runs() -> None:
    one = run_summary()
    assert system_json([one]) is one
    body = system_json([run_summary(0.6, run=1), run_summary(0.8, run=2)])
    assert body.keys() == {"figures", "runs"}
    assert body["figures"]["utilization"] == {"median": 0.7, "min": 0.6, "max": 0.8, "runs": 2}
    assert [r["run"] for r in body["runs"]] == [1, 2]
    assert "run" not in body["figures"]  # a run's label is no figure
    failed = system_json([{"error": "BuildError: no Go"}, {"error": "BuildError: no Go"}])
    assert failed == {"error": "BuildError: no Go", "runs": [{"error": "BuildError: no Go"}] * 2}
    json.dumps(body)  # what -o json prints


def test_the_run_shown_is_the_one_nearest_the_median() -> None:
    assert median_run([run_summary(0.4), run_summary(0.9), run_summary(0.6)]) == 2
    assert median_run([{"error": "x"}, run_summary(0.5)]) == 1
    assert median_run([{"error": "x"}]) is None


def test_the_table_shows_medians_and_the_spread_where_runs_differ() -> None:
    airlock = [run_summary(0.626, p99=348.0, training_mean=57.6, lostGpuSeconds=0),
               run_summary(0.704, p99=250.0, training_mean=40.0, lostGpuSeconds=7200),
               run_summary(0.650, p99=300.0, training_mean=50.0, lostGpuSeconds=3600)]
    stuck = [run_summary(stuck=0), run_summary(stuck=2, completed=0)]
    table = markdown({"airlock": airlock, "stock": stuck,
                      "kueue": [{"error": "BuildError: no Go\ngo: lines"}] * 3}, [run_summary()])
    assert table.splitlines()[0] == "| | airlock | stock | airlock simulate |"
    assert set(table.splitlines()) >= {
        "| utilization | 65.0% (62.6%-70.4%) | 50.0% | 50.0% |",
        "| wait p50 / p99 | 10 / 300 (250-348) s | 10 / 30 s | 10 / 30 s |",
        "| training wait mean | 50 (40-58) s | 600 s | 600 s |",
        "| GPU-hours lost to preemption | 1.00 (0.00-2.00) | 0.00 | 0.00 |",
        "| jobs completed | 2 / 2 | 1 (0-2) / 2, 1 (0-2) stuck | 2 / 2 |",
        "| inference wait p50 / p99 | - | - | - |"}
    assert "the median of 3 replays per system" in table
    assert "**kueue** did not run: BuildError: no Go\n" in table
    partly = markdown({"kueue": [run_summary(), {"error": "RuntimeError: probe"}]}, None)
    assert "**kueue**: 1 of 2 replays did not run (first: RuntimeError: probe)" in partly


def test_a_single_run_table_shows_plain_figures() -> None:
    table = markdown({"stock": [run_summary()]}, None)
    assert "| utilization | 50.0% |" in table
    assert "median" not in table
    assert "(" not in table.split("| preemptions")[0].split(
        "| jobs")[1]


@pytest.mark.parametrize(("spec", "seeds"), [
    ("11-15", [11, 12, 13, 14, 15]), ("3,1,3", [3, 1]), ("1-2,7", [1, 2, 7]), ("4", [4])])
def test_a_family_names_its_seeds(spec: str, seeds: list[int]) -> None:
    assert family.seeds(spec) == seeds


@pytest.mark.parametrize("spec", ["", "a-b", "5-3", "1-100", "1,,2"])
def test_a_family_refuses_seeds_it_cannot_read(spec: str) -> None:
    with pytest.raises(TraceError, match="family:"):
        family.seeds(spec)


def test_a_familys_seed_4_is_the_contended_trace_and_its_members_differ() -> None:
    contended = read_trace(ROOT / "bench" / "traces" / "contended.jsonl")
    members = family.members("family:4-5")
    assert [m.label for m in members] == ["seed 4", "seed 5"]
    assert members[0].jobs == contended
    assert members[1].jobs != contended
    assert len(members[1].jobs) == family.JOBS
    (one,) = family.members(str(TINY))
    assert one.label == str(TINY)
    assert len(one.jobs) == 4


@pytest.fixture
def replayed(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """`replay` replaced by the simulation of the job list (each run a little later than
    the last, so runs differ); the (system, first job) of each replay, in order."""
    calls: list[tuple[str, str]] = []

    def replay(system: System, jobs: Sequence[Job], policy: Policy, options: Options,
               _progress: Any) -> Outcome:
        if system == "kueue":
            raise RuntimeError("kueue: the probe gang did not run")
        calls.append((system, jobs[0].name))
        shape = clusters.Shape(options.shape.nodes, options.shape.gpus_per_node,
                               options.shape.nodes_per_domain, pools=options.shape.pools)
        run = simulate(jobs, policy, shape, "airlock" if system == "airlock" else "stock")
        late = 10.0 * len(calls)
        return Outcome(system, run.timelines, run.end + late, 1.0, "settled", {})

    monkeypatch.setattr(measuring_module, "replay", replay)
    return calls


def test_runs_interleave_the_systems_and_report_each_figures_spread(
        replayed: list[tuple[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trace", str(TINY), "--runs", "2", "--systems", "stock,kueue,airlock",
                 "--nodes", "4", "--out", str(tmp_path), "-o", "json"]) == 0
    assert replayed == [("stock", "gang-a"), ("airlock", "gang-a")] * 2
    body = json.loads(capsys.readouterr().out)
    assert body["runs"] == 2
    assert body["traces"] == [str(TINY)]
    airlock = body["systems"]["airlock"]
    assert [(r["run"], r["trace"]) for r in airlock["runs"]] == [(1, str(TINY)), (2, str(TINY))]
    assert airlock["figures"]["completed"]["median"] == 4
    assert airlock["figures"]["utilization"]["runs"] == 2
    assert body["systems"]["kueue"]["error"].startswith("RuntimeError: kueue")
    assert len(body["systems"]["kueue"]["runs"]) == 2
    # The simulation is deterministic: one summary, as before; the gap is to the medians.
    assert "figures" not in body["simulation"]["airlock"]
    assert body["simulation"]["gap"].keys() == {"waitP50", "waitP99", "utilization"}
    assert json.loads((tmp_path / "peers.json").read_text()) == body
    table = (tmp_path / "peers.md").read_text()
    assert "the median of 2 replays per system" in table
    assert "**kueue** did not run: RuntimeError: kueue" in table
    assert {p.name for p in tmp_path.iterdir()} >= {"gpus.png", "waits.png", "queue.png",
                                                    "spread.png"}
    height, width, _ = imread(tmp_path / "spread.png").shape
    assert width <= 1600
    assert height < width


def test_a_family_replays_every_member_in_every_run(
        replayed: list[tuple[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trace", "family:4-5", "--systems", "stock,airlock",
                 "--out", str(tmp_path), "-o", "json"]) == 0
    first = {m.label: m.jobs[0].name for m in family.members("family:4-5")}
    assert replayed == [("stock", first["seed 4"]), ("airlock", first["seed 4"]),
                        ("stock", first["seed 5"]), ("airlock", first["seed 5"])]
    body = json.loads(capsys.readouterr().out)
    assert body["traces"] == ["seed 4", "seed 5"]
    assert body["runs"] == 1
    assert [r["trace"] for r in body["systems"]["stock"]["runs"]] == ["seed 4", "seed 5"]
    # A member per seed: the simulation's figures spread over the family too.
    assert body["simulation"]["airlock"]["figures"]["jobs"]["median"] == family.JOBS


@pytest.mark.usefixtures("replayed")
def test_one_run_of_one_trace_keeps_the_json_of_a_single_run(
        tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trace", str(TINY), "--systems", "airlock", "--nodes", "4",
                 "--out", str(tmp_path), "-o", "json"]) == 0
    body = json.loads(capsys.readouterr().out)
    assert "runs" not in body
    assert "traces" not in body
    assert "figures" not in body["systems"]["airlock"]
    assert body["systems"]["airlock"]["completed"] == 4


@pytest.mark.parametrize("runs", ["0", "-1", "two"])
def test_runs_are_a_whole_number_from_one(runs: str, capsys: pytest.CaptureFixture[str]
                                          ) -> None:
    with pytest.raises(SystemExit):
        main(["--trace", str(TINY), "--runs", runs])
    assert "a whole number of runs, 1 or more" in capsys.readouterr().err


def test_a_mixed_model_cluster_reaches_the_sandbox_and_the_simulation(
        replayed: list[tuple[str, str]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--trace", str(TINY), "--systems", "stock,airlock", "--pools",
                 "h100=3x8/3,l4=2x1", "--out", str(tmp_path), "-o", "json"]) == 0
    assert [s for s, _ in replayed] == ["stock", "airlock"]
    body = json.loads(capsys.readouterr().out)
    assert [(p["name"], p["product"], p["count"], p["gpusPerNode"])
            for p in body["cluster"]["pools"]] == [
        ("h100", "NVIDIA-H100-80GB-HBM3", 3, 8), ("l4", "NVIDIA-L4", 2, 1)]
    # 26 GPUs: gang-a (3 x 8) fits the H100s, and every job completes.
    assert body["systems"]["airlock"]["completed"] == 4
    assert body["simulation"]["airlock"]["completed"] == 4


def test_a_mixed_model_cluster_gives_every_system_the_pools_models_and_queues(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    seen: dict[str, tuple[Policy, Options]] = {}

    def replay(system: System, _jobs: Sequence[Job], policy: Policy, options: Options,
               _progress: Any) -> Outcome:
        seen[system] = (policy, options)
        raise RuntimeError("not run")

    monkeypatch.setattr(measuring_module, "replay", replay)
    assert main(["--trace", str(TINY), "--pools", "h100=2x8,l4=2x1",
                 "--out", str(tmp_path), "-o", "json"]) == 0
    assert list(seen) == ["stock", "coscheduling", "kueue", "airlock"]
    policy, options = seen["kueue"]
    assert [m.name for m in policy.gpu_models] == ["h100", "l4"]
    assert [q.name for q in policy.queues] == ["team-a", "team-b"]
    # The file the Airlock run adds to its policies, kept beside the results.
    assert options.models_file == tmp_path / "96-pool-models.yaml"
    assert "gpuModels" in options.models_file.read_text()


def test_a_mixed_model_cluster_refuses_policies_with_models_of_their_own(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policies = tmp_path / "policies"
    policies.mkdir()
    for path in (ROOT / "policies").glob("*.yaml"):
        (policies / path.name).write_text(path.read_text())
    (policies / "50-queues.yaml").write_text(
        "apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\nmetadata: {name: q}\n"
        "spec:\n  queues: [{name: team, namespaces: [team-a]}]\n")
    assert main(["--trace", str(TINY), "--pools", "h100=2x8,l4=2x1", "--policies",
                 str(policies), "--out", str(tmp_path / "out")]) == 1
    assert "--pools writes the GPU models and a queue per team itself" in \
        capsys.readouterr().err


def test_a_trace_naming_a_model_the_policy_lacks_stops_with_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    models = ROOT / "bench" / "traces" / "models.jsonl"
    assert main(["--trace", str(models), "--pools", "h100=2x8,l4=2x1",
                 "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{models}:4: job team-a/a-first: gpuModels ")
    assert "a100" in err
