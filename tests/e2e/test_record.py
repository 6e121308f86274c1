"""`airlock record` on a sandbox of two GPU models: users' Jobs (an indexed Job's gang on
H100s, a single pod on A100s, one still running at the end) and a JobSet's gang on A100s
run on the real control plane and the real JobSet operator,
a recording watches them, and `airlock simulate --cluster-from` replays the trace on the
sandbox's own pools. The controller's lifecycle log of the same run makes the same
trace."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.builders import policy_yaml, template
from tests.commands import airlock, airlock_command
from tests.e2e.test_sandbox import sandbox, state_dir
from tests.kube import fresh_namespaces, pods_of, until
from tests.paths import POLICIES, ROOT
from webhook.keys import CLASS_LABEL
from webhook.policy.loading import load_policy, policy_files
from webhook.pools import PRODUCT_LABEL
from webhook.recording.commands import live_pools
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.stages import DELAY
from webhook.simulation.clusters import Shape
from webhook.simulation.simulating import Simulation
from webhook.simulation.traces import read_trace

__all__ = ["state_dir"]  # the fixture, shared with the sandbox's own tests

H100, A100 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"
WATCH_SECONDS = 75
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")


def _job(name: str, pods: int, gpus: int, product: str, runtime: str) -> dict[str, Any]:
    """A Job of `pods` workers (an indexed Job: a gang) as a user writes it, on one GPU
    model by its product label, running `runtime` (KWOK's run time)."""
    pod = template(gpus=gpus, labels={CLASS_LABEL: "training"},
                   nodeSelector={PRODUCT_LABEL: product}, restartPolicy="Never")
    pod["metadata"]["annotations"] = {DELAY: runtime}
    spec: dict[str, Any] = {"template": pod, "backoffLimit": 0}
    if pods > 1:
        spec |= {"parallelism": pods, "completions": pods, "completionMode": "Indexed"}
    return {"metadata": {"name": name}, "spec": spec}


def _jobset(name: str, pods: int, gpus: int, product: str, runtime: str) -> dict[str, Any]:
    """A JobSet of one replicated Job of `pods` workers: one gang."""
    job = _job("workers", pods, gpus, product, runtime)
    del job["metadata"]
    return {"apiVersion": f"{JOBSET[0]}/{JOBSET[1]}", "kind": "JobSet",
            "metadata": {"name": name},
            "spec": {"replicatedJobs": [{"name": "workers", "replicas": 1,
                                         "template": job}]}}


async def _run_jobs(kubeconfig: Path, recording: subprocess.Popen[str]) -> tuple[str, str]:
    """The three Jobs, in a fresh namespace kept until the recording ends (what it says,
    and the namespace)."""
    async with await from_kubeconfig(kubeconfig) as api, \
            fresh_namespaces(api, "e2e-record") as make:
        ns = await make()
        batch = client.BatchV1Api(api)
        for job in (_job("train", 2, 8, H100, "20s"), _job("eval", 1, 4, A100, "10s"),
                    _job("serve", 1, 2, A100, "1h")):
            await batch.create_namespaced_job(ns, body=job)
        await client.CustomObjectsApi(api).create_namespaced_custom_object(
            JOBSET[0], JOBSET[1], ns, JOBSET[2], _jobset("pretrain", 2, 4, A100, "15s"))

        async def done() -> bool:
            phases = [(p.get("status") or {}).get("phase")
                      for p in await pods_of(api, ns, "")]
            return phases.count("Succeeded") == 5
        await until(done, within=WATCH_SECONDS - 10)
        _, said = await asyncio.to_thread(recording.communicate, timeout=120)
        return ns, said


def _jobs(trace: Path) -> dict[str, dict[str, Any]]:
    """The trace's jobs, by name without the pod's generated suffix."""
    lines = trace.read_text().splitlines()
    return {json.loads(line)["name"].split("-")[0]: json.loads(line) for line in lines
            if line and not line.startswith("#")}


def _models_policy(tmp_path: Path) -> Path:
    """policies/ and the sandbox's two models, named as the recording names them."""
    directory = tmp_path / "policies"
    directory.mkdir()
    for f in policy_files(POLICIES):
        shutil.copy(f, directory / f.name)
    (directory / "90-models.yaml").write_text(policy_yaml("record-models", {"gpuModels": [
        {"name": "h100", "nodeLabels": {PRODUCT_LABEL: H100}},
        {"name": "a100", "nodeLabels": {PRODUCT_LABEL: A100}}]}))
    return directory


def _replayed(trace: Path, kubeconfig: Path, policies: Path) -> dict[str, Any]:
    done = airlock("simulate", "--trace", str(trace), "--cluster-from", str(kubeconfig),
                   "--policies", str(policies), "-o", "json")
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def _landed(trace: Path, kubeconfig: Path, policies: Path) -> dict[str, tuple[set[str], float]]:
    """Each replayed job's nodes' pools and its run time, the simulation run in place."""
    pools: dict[str, set[str]] = {}
    simulation = Simulation(read_trace(trace), load_policy(policies),
                            Shape(pools=live_pools(kubeconfig)), "airlock")
    simulation.on_bind = lambda job, _attempt, _pod, node: pools.setdefault(
        job.name.split("-")[0], set()).add(node.rsplit("-", 1)[0])
    run = simulation.run("airlock")
    return {t.name.split("-")[0]: (pools[t.name.split("-")[0]],
                                   (t.completed or 0) - (t.started or 0))
            for t in run.timelines}


def test_record_watches_a_mixed_sandbox_and_simulate_replays_what_ran(
        state_dir: Path, tmp_path: Path) -> None:
    up = sandbox("up", "--pools", "h100=2x8/2,a100=2x8", "--operators", "jobset",
                 "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr[-3000:]
    state = json.loads((state_dir / "state.json").read_text())
    kubeconfig = Path(state["kubeconfig"])
    trace = tmp_path / "watched.jsonl"
    recording = subprocess.Popen(
        airlock_command("record", "--kubeconfig", str(kubeconfig), "--for",
                        f"{WATCH_SECONDS}s", "-o", str(trace)),
        cwd=ROOT, stderr=subprocess.PIPE, text=True)
    try:
        assert recording.stderr is not None
        assert recording.stderr.readline().startswith("recording the GPU pods of ")
        ns, said = asyncio.run(_run_jobs(kubeconfig, recording))
    finally:
        recording.kill()
    assert recording.returncode == 0, said
    assert "recorded 4 jobs" in said

    jobs = _jobs(trace)
    assert {name: (j["namespace"], j["class"], j["pods"], j["gpus"], j["gpuModels"])
            for name, j in jobs.items()} == {
        "train": (ns, "training", 2, 8, ["h100"]), "eval": (ns, "training", 1, 4, ["a100"]),
        "serve": (ns, "training", 1, 2, ["a100"]),
        "pretrain": (ns, "training", 2, 4, ["a100"])}
    # KWOK runs each pod for its stated run time, to the second.
    assert 19 <= jobs["train"]["runtime"] <= 22, jobs
    assert 9 <= jobs["eval"]["runtime"] <= 12, jobs
    assert 14 <= jobs["pretrain"]["runtime"] <= 17, jobs
    # The one still running when the recording ended: what it had run, said so.
    assert jobs["serve"]["runtime"] >= WATCH_SECONDS - 30, jobs
    assert "# still running when the recording ended" in trace.read_text()

    policies = _models_policy(tmp_path)
    replay = _replayed(trace, kubeconfig, policies)
    assert [(p["name"], p["product"], p["count"], p["gpusPerNode"], p["nodesPerDomain"])
            for p in replay["cluster"]["pools"]] == [
        ("a100", A100, 2, 8, 2), ("h100", H100, 2, 8, 2)]
    assert (replay["jobs"], replay["completed"], replay["neverRunnable"]) == (4, 4, 0)
    assert replay["gpuSeconds"] == sum(j["pods"] * j["gpus"] * j["runtime"]
                                       for j in jobs.values())
    # Each job replayed on the model it ran on, for as long as it ran.
    assert _landed(trace, kubeconfig, policies) == {
        name: ({j["gpuModels"][0]}, j["runtime"]) for name, j in jobs.items()}

    # The controller's own log of the same run: the same jobs, but for the one still
    # running, whose run so far ends at the log's last event.
    logged = tmp_path / "logged.jsonl"
    controller_log = next(p["log"] for p in state["processes"]
                          if p["name"] == "airlock-controller")
    done = airlock("record", "--from-log", controller_log, "-o", str(logged))
    assert done.returncode == 0, done.stderr
    from_log = _jobs(logged)
    assert {n: {k: v for k, v in j.items() if k != "runtime"} for n, j in from_log.items()} \
        == {n: {k: v for k, v in j.items() if k != "runtime"} for n, j in jobs.items()}
    for name in ("train", "eval", "pretrain"):
        assert abs(from_log[name]["runtime"] - jobs[name]["runtime"]) <= 2, (from_log, jobs)
