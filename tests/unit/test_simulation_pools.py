"""`airlock simulate --cluster`: a cluster of pools of several GPU models, and jobs whose
pods select one model by GPU feature discovery's product label."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.builders import GPU_MODELS, make_policy
from tests.commands import airlock
from webhook.controller.core.deciding import DecideOptions
from webhook.controller.core.placement.pins import PIN_MODES, PinMode
from webhook.policy.model import Policy
from webhook.pools import parse_spec
from webhook.simulation.clusters import Cluster, PodKey, Resident, Shape
from webhook.simulation.runs import Scheduler
from webhook.simulation.simulating import Simulation, simulate
from webhook.simulation.traces import Job

PRODUCT = "nvidia.com/gpu.product"
H100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"
# The A100s first: a pod that selects nothing is placed there before anywhere else.
MIXED = Shape(pools=parse_spec("a100=2x8,h100=2x8,l4=2x1"))


def job(name: str, pods: int, gpus: int, product: str | None = None, submit: float = 0.0,
        **fields: object) -> Job:
    made = Job(name, submit, "ml", "training" if pods > 1 else "inference", pods, gpus, 100.0)
    selector = ((PRODUCT, product),) if product else ()
    return dataclasses.replace(made, node_selector=selector, **fields)  # type: ignore[arg-type]


def products(jobs: list[Job], policy: Policy, scheduler: Scheduler,
             monkeypatch: pytest.MonkeyPatch, options: DecideOptions | None = None
             ) -> dict[str, set[str]]:
    """Each job's pods' node models, as the run bound them (a pod is `<job>-<i>`)."""
    sim = Simulation(jobs, policy, MIXED, scheduler, options or DecideOptions())
    landed: dict[str, set[str]] = {}
    bind = sim.cluster.bind

    def recording(node: int, key: PodKey, resident: Resident) -> None:
        landed.setdefault(key[1].rsplit("-", 1)[0], set()).add(
            sim.cluster.labels[node][PRODUCT])
        bind(node, key, resident)

    monkeypatch.setattr(sim.cluster, "bind", recording)
    sim.run(scheduler)
    return landed


@pytest.mark.parametrize("scheduler", ["airlock", "stock"])
def test_pods_that_select_a_model_land_only_on_its_nodes(
        scheduler: Scheduler, policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = [job("train", 2, 8, H100), job("serve", 1, 1, L4), job("solo", 1, 8, H100),
            job("anywhere", 1, 8)]
    landed = products(jobs, policy, scheduler, monkeypatch)
    assert landed == {"train": {H100}, "serve": {L4}, "solo": {H100},
                      "anywhere": {"NVIDIA-A100-SXM4-80GB"}}


@pytest.mark.parametrize("pin", PIN_MODES)
def test_jobs_that_name_gpu_models_land_whole_on_the_first_they_name_with_room(
        pin: PinMode, monkeypatch: pytest.MonkeyPatch) -> None:
    # The A100s come first in node order: only the pods' gpu-models annotation, read by
    # the controller and pinned at ungate, keeps `first` off them; `second` finds the
    # H100s full and lands whole on its next model.
    policy = make_policy(gpu_models=GPU_MODELS)
    jobs = [job("first", 2, 8, gpu_models=("h100",)),
            job("second", 2, 8, submit=1, gpu_models=("h100", "a100")),
            job("small", 1, 1, cls="training", gpu_models=("l4", "h100"))]
    landed = products(jobs, policy, "airlock", monkeypatch, DecideOptions(pin=pin))
    assert landed == {"first": {H100}, "second": {"NVIDIA-A100-SXM4-80GB"}, "small": {L4}}


@pytest.mark.parametrize("scheduler", ["airlock", "stock"])
def test_a_pod_airlock_does_not_gate_keeps_to_the_models_it_names(
        scheduler: Scheduler, monkeypatch: pytest.MonkeyPatch) -> None:
    # Serving replicas go straight to the scheduler, A100s first in node order: only the
    # required node affinity admission writes keeps them to the H100s and L4s they name
    # (the emptiest of those nodes: the H100s, under LeastAllocated).
    policy = make_policy(gpu_models=GPU_MODELS)
    jobs = [job(f"serve{i}", 1, 1, submit=i, gpu_models=("l4", "h100")) for i in range(4)]
    landed = products(jobs, policy, scheduler, monkeypatch)
    assert len(landed) == 4
    assert set().union(*landed.values()) <= {L4, H100}


def test_simulate_stops_at_the_line_of_a_model_the_policy_lacks(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(job("serve", 1, 1).to_json() + "\n"
                     + job("train", 2, 8, gpu_models=("h200",)).to_json() + "\n")
    done = airlock("simulate", "--trace", str(trace), "--cluster", "h100=2x8")
    assert done.returncode == 1
    assert done.stderr.strip() == (f"{trace}:2: job ml/train: gpuModels names 'h200', which "
                                   f"the policy does not define; the models on offer: none")


def test_pods_of_one_model_wait_for_its_nodes_while_others_are_free(policy: Policy) -> None:
    # Three 1-GPU pods for two L4 nodes: one waits for the first to end, with 32 GPUs of
    # other models free all along.
    jobs = [job(f"serve-{i}", 1, 1, L4) for i in range(3)]
    waits = simulate(jobs, policy, MIXED, "airlock").summary()["wait"]
    assert (waits["p50"], waits["p99"]) == (0.0, 100.0)
    anywhere = [dataclasses.replace(j, node_selector=()) for j in jobs]
    assert simulate(anywhere, policy, MIXED, "airlock").summary()["wait"]["p99"] == 0.0


@pytest.mark.parametrize(("never", "why"), [
    (job("wide", 1, 2, L4), "more GPUs than any L4 node has"),
    (job("gone", 1, 1, "NVIDIA-B200"), "a model the cluster does not have"),
    (job("many", 3, 8, H100), "more GPUs than all the H100s"),
    (job("linked", 2, 1, L4, required_topology="nvlink"), "an NVLink domain no L4 is in"),
])
def test_a_job_no_node_of_its_model_can_run_is_never_runnable(
        never: Job, why: str, policy: Policy) -> None:
    run = simulate([never, job("fine", 1, 1, L4)], policy, MIXED, "airlock").summary()
    assert run["neverRunnableJobs"] == [f"ml/{never.name}"], why
    assert run["completed"] == 1


def test_each_pools_nodes_carry_its_model_and_only_nvlink_pools_a_domain() -> None:
    cluster = Cluster(MIXED, ["nvidia.com/gpu.clique"], "nvidia.com/gpu", [0])
    views = {v.name: v for v in cluster.node_views()}
    assert list(views) == ["a100-00000", "a100-00001", "h100-00000", "h100-00001",
                           "l4-00000", "l4-00001"]
    assert views["l4-00001"].labels[PRODUCT] == L4
    assert views["l4-00001"].allocatable["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu.clique" not in views["l4-00001"].labels
    assert {views[n].labels["nvidia.com/gpu.clique"] for n in ("a100-00000", "h100-00000")} \
        == {"domain-0000", "domain-0001"}
    assert cluster.pick(1, None, selector=((PRODUCT, L4),)) == 4
    assert cluster.pick(2, None, selector=((PRODUCT, L4),)) is None


def test_simulate_takes_a_cluster_spec_and_shows_its_pools(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(job("serve", 1, 1, L4).to_json() + "\n")
    done = airlock("simulate", "--trace", str(trace), "--cluster", "h100=2x8/2,l4=2x1",
                   "-o", "json")
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["cluster"] == {"nodes": 4, "gpus": 18, "pools": [
        {"name": "h100", "product": H100, "count": 2, "gpusPerNode": 8, "nodesPerDomain": 2},
        {"name": "l4", "product": L4, "count": 2, "gpusPerNode": 1, "nodesPerDomain": None}]}
    assert out["completed"] == 1
    text = airlock("simulate", "--trace", str(trace), "--cluster", "h100=2x8/2,l4=2x1")
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("cluster: 4 nodes (18 GPUs) in pools h100 2x8/2, l4 2x1;")


@pytest.mark.parametrize(("argv", "said"), [
    (("--cluster", "l4=2x1", "--nodes", "4"), "--cluster describes every node: drop --nodes"),
    (("--nodes", "0"), "pool 1 (node) count: Input should be greater than or equal to 1"),
    (("--gpus-per-node", "32"), "gpusPerNode: Input should be less than or equal to 16"),
])
def test_simulate_refuses_flags_that_make_no_cluster(argv: tuple[str, ...], said: str,
                                                     tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text(job("serve", 1, 1, L4).to_json() + "\n")
    done = airlock("simulate", "--trace", str(trace), *argv)
    assert done.returncode == 2
    assert said in done.stderr


def test_simulate_stops_at_the_line_of_a_typo_in_the_cluster_file(tmp_path: Path) -> None:
    trace, cluster = tmp_path / "trace.jsonl", tmp_path / "cluster.yaml"
    trace.write_text(job("serve", 1, 1, L4).to_json() + "\n")
    cluster.write_text("pools:\n- name: serve\n  model: l4\n  count: 2\n  gpusPerNod: 1\n")
    done = airlock("simulate", "--trace", str(trace), "--cluster", str(cluster))
    assert done.returncode == 2
    assert f"{cluster}:5: pool 1 (serve) gpusPerNod: unknown field; a pool has name," \
        in done.stderr
