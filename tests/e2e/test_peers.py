"""The peers on the real sandbox. `python -m bench.peers` end to end on a tiny trace (two
gangs that cannot both fit, two single pods; 4 nodes x 8 GPUs at 50x speed): the stock
scheduler and Airlock always, twice each (`--runs 2`: the figures' median and spread),
and each peer once in its own test (a single run's JSON). Then coscheduling's own
promise, on its real scheduler and controller: a PodGroup is bound whole or not at all.

Peers this file requires: Kueue v0.17.0 and coscheduling (scheduler-plugins v0.34.7),
built from their Go modules by the test command's build step (`python -m bench.peers
--build kueue,coscheduling`). Where one is not built its tests skip, and under CI=true
fail.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from bench.peers.manifests import Attempt, pod_group, pods
from bench.peers.peers import COSCHEDULING, PEERS, POD_GROUP_LABEL
from tests.builders import make_policy
from tests.kube import all_running, events, pods_of, progress, until
from tests.paths import ROOT
from webhook.keys import ClassName
from webhook.sandbox import wiring
from webhook.sandbox.binaries import Binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import HOST_LABEL as HOST
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.operating import RunningCommand, start_operators, stop
from webhook.simulation.traces import Job

TINY = ROOT / "bench" / "traces" / "tiny.jsonl"
MODELS = ROOT / "bench" / "traces" / "models.jsonl"
KEYS = {"jobs", "completed", "makespan", "wait", "utilization", "partialGangGpuSeconds",
        "preemptions"}


def bench_peers(systems: str, out: Path, runs: int = 1, trace: Path = TINY,
                cluster: tuple[str, ...] = ("--nodes", "4")) -> dict[str, Any]:
    replays = runs * len(systems.split(","))
    run = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--trace", str(trace), "--systems", systems,
         *cluster, "--speed", "50", "--stall", "5", "--timeout", "60",
         "--runs", str(runs), "--out", str(out), "-o", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=50 + 85 * replays, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    body: dict[str, Any] = json.loads(run.stdout)
    return body


@pytest.mark.usefixtures("binaries")
def test_stock_and_airlock_run_the_trace_and_airlock_never_half_places_a_gang(
        tmp_path: Path) -> None:
    body = bench_peers("stock,airlock", tmp_path, runs=2)
    assert set(body["systems"]) == {"stock", "airlock"}
    assert body["runs"] == 2
    for system in body["systems"].values():
        assert "error" not in system
        assert [r["run"] for r in system["runs"]] == [1, 2]
        for summary in system["runs"]:
            assert "error" not in summary
            assert summary.keys() >= KEYS
            assert summary["wait"].keys() >= {"p50", "p99"}
        figures = system["figures"]
        assert figures["utilization"]["runs"] == 2
        assert figures["utilization"]["min"] <= figures["utilization"]["median"] <= \
            figures["utilization"]["max"]
    for airlock in body["systems"]["airlock"]["runs"]:
        assert airlock["completed"] == airlock["jobs"] == 4
        assert airlock["partialGangGpuSeconds"] == 0
    assert body["simulation"]["gap"].keys() == {"waitP50", "waitP99", "utilization"}
    assert "the median of 2 replays" in (tmp_path / "peers.md").read_text()
    assert {p.name for p in tmp_path.iterdir()} >= {"peers.md", "peers.json", "gpus.png",
                                                    "spread.png"}
    # One run's logs per run, none overwritten.
    assert {p.name for p in (tmp_path / "logs").iterdir()} == {"run-1-1", "run-2-1"}


def require_built(peer: str) -> None:
    op = PEERS[peer]
    if not all(op.tool.cached(name) for name in op.tool.commands):
        message = f"{peer} is not built ({op.tool.label}; cache {op.tool.bin_dir})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.mark.usefixtures("binaries")
@pytest.mark.parametrize("peer", ["coscheduling", "kueue"])
def test_a_peer_runs_the_trace(peer: str, tmp_path: Path) -> None:
    require_built(peer)
    body = bench_peers(peer, tmp_path)
    assert "runs" not in body  # one run: a single run's JSON
    summary = body["systems"][peer]
    assert "error" not in summary, summary
    assert summary.keys() >= KEYS
    assert summary["completed"] == summary["jobs"] == 4


@pytest.mark.usefixtures("binaries")
def test_kueue_on_a_mixed_cluster_runs_each_gang_on_the_model_it_names(tmp_path: Path) -> None:
    """A ResourceFlavor per model and quotas per flavor (bench.peers.models): the H100
    gang is admitted on the idle H100s while the second A100 gang waits for the first;
    a quota still held by the probe's finished group would keep it waiting too."""
    require_built("kueue")
    body = bench_peers("kueue", tmp_path, trace=MODELS,
                       cluster=("--pools", "h100=2x8/2,a100=2x8/2"))
    summary = body["systems"]["kueue"]
    assert "error" not in summary, summary
    assert summary["completed"] == summary["jobs"] == 3
    assert summary["partialGangGpuSeconds"] == 0
    teams = summary["namespaces"]
    assert teams["team-b"]["wait"]["p99"] < teams["team-a"]["wait"]["p99"]


# Coscheduling's cluster: 4 nodes of 8 GPUs, two NVLink domains (and blocks) of two,
# only its scheduler's pods on them.
NODES = 4
SHAPE = Shape(nodes=NODES, nodes_per_domain=2, domains_per_block=1)
WITHIN = 60.0


@pytest.fixture(scope="module")
def coscheduling(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
                 ) -> Iterator[ControlPlane]:
    """A control plane of its own (no Airlock webhook: Airlock would gate PodGroup pods)
    running scheduler-plugins' scheduler and controller as bench.peers runs them."""
    require_built("coscheduling")
    plane = ControlPlane(binaries).start()
    running: list[RunningCommand] = []
    try:
        async def cluster() -> None:
            async with await from_kubeconfig(plane.admin_kubeconfig) as api:
                await wiring.create_priority_classes(api, make_policy())
                await create_nodes(api, topology(SHAPE))

        asyncio.run(cluster())
        running = start_operators([COSCHEDULING], tmp_path_factory.mktemp("coscheduling"),
                                  plane.admin_kubeconfig, plane.pki.ca,
                                  progress)
        yield plane
    finally:
        stop(running)
        plane.remove()


@pytest.fixture
async def cosched_api(coscheduling: ControlPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(coscheduling.admin_kubeconfig) as api:
        yield api


@pytest.fixture
async def cosched_ns(cosched_api: client.ApiClient, request: pytest.FixtureRequest
                    ) -> AsyncIterator[str]:
    """A namespace whose pods are gone when the test ends, so the next finds every GPU
    free."""
    ns = "cs-" + request.node.name.removeprefix("test_")[:40].replace("_", "-").strip("-")
    await wiring.create_namespace(cosched_api, ns)
    yield ns
    await clear(cosched_api, ns)


async def clear(api: client.ApiClient, ns: str) -> None:
    await client.CoreV1Api(api).delete_collection_namespaced_pod(ns, grace_period_seconds=0)

    async def gone() -> bool:
        return not await pods_of(api, ns)

    await until(gone, within=WITHIN)


def gang(ns: str, name: str, pods: int, gpus: int, cls: ClassName = "scavenger",
         node: str | None = None) -> Attempt:
    """A job's first attempt; of a class with no topology unless `cls` says otherwise."""
    return Attempt(Job(name=name, submit=0.0, namespace=ns, cls=cls, pods=pods, gpus=gpus,
                       runtime=1.0, node_selector=((HOST, node),) if node else ()), 0)


async def submit(api: client.ApiClient, attempt: Attempt, grouped: bool = True) -> None:
    """The gang as bench.peers writes it: its PodGroup (minMember: every pod), then its pods
    all at once. Not grouped: the same pods for the same scheduler, without the label."""
    group = pod_group(attempt)
    core = client.CoreV1Api(api)
    made = pods("coscheduling", attempt, make_policy())
    if group is not None and grouped:
        await client.CustomObjectsApi(api).create_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", attempt.job.namespace, "podgroups", group)
    elif group is not None:
        for pod in made:
            del pod["metadata"]["labels"][POD_GROUP_LABEL]
    await asyncio.gather(*(core.create_namespaced_pod(attempt.job.namespace, body=pod)
                           for pod in made))


def bound(items: list[dict[str, Any]]) -> dict[str, str]:
    return {p["metadata"]["name"]: p["spec"]["nodeName"] for p in items
            if p["spec"].get("nodeName")}


async def test_a_pod_group_that_fits_is_bound_whole_and_its_status_says_running(
        cosched_api: client.ApiClient, cosched_ns: str) -> None:
    # 4 pods of 4 GPUs: 16 of the 24 GPUs, on at least two nodes.
    attempt = gang(cosched_ns, "fits", pods=4, gpus=4)
    await submit(cosched_api, attempt)
    await until(lambda: all_running(cosched_api, cosched_ns, "", 4), within=WITHIN)
    placed = bound(await pods_of(cosched_api, cosched_ns))
    assert sorted(placed) == attempt.pod_names
    assert len(set(placed.values())) >= 2

    async def status() -> dict[str, Any]:
        got: dict[str, Any] = await client.CustomObjectsApi(
            cosched_api).get_namespaced_custom_object(
            "scheduling.x-k8s.io", "v1alpha1", cosched_ns, "podgroups", attempt.group)
        return got.get("status") or {}

    async def kept() -> bool:  # by scheduler-plugins' controller
        return (await status()).get("phase") == "Running"

    await until(kept, within=WITHIN)
    assert (await status()).get("running") == 4


async def test_a_pod_group_that_cannot_fit_whole_binds_none_where_loose_pods_bind_four(
        cosched_api: client.ApiClient, cosched_ns: str) -> None:
    # 5 pods of 8 GPUs on 4 nodes of 8: four would fit, the fifth never.
    attempt = gang(cosched_ns, "too-big", pods=NODES + 1, gpus=8)
    await submit(cosched_api, attempt)

    async def rejected() -> bool:
        return any("gets rejected" in m for m in await events(cosched_api, cosched_ns))

    # The scheduler took the gang, held the members that fit at Permit, failed the
    # fifth and let the others go: from then on nothing of it can have been bound.
    await until(rejected, within=WITHIN)
    items = await pods_of(cosched_api, cosched_ns)
    assert len(items) == NODES + 1
    assert bound(items) == {}
    assert all(p["status"].get("phase") == "Pending" for p in items)

    # The same pods without the group: the same scheduler places four of them, so it
    # was the group that held them.
    await clear(cosched_api, cosched_ns)
    await submit(cosched_api, gang(cosched_ns, "loose", pods=NODES + 1, gpus=8),
                 grouped=False)

    async def four_bound() -> bool:
        return len(bound(await pods_of(cosched_api, cosched_ns))) == NODES

    await until(four_bound, within=WITHIN)


async def test_a_pod_group_keeps_its_topology_by_pod_affinity_as_bench_peers_writes_it(
        cosched_api: client.ApiClient, cosched_ns: str) -> None:
    """Training's NVLink domain is required (the test policy's class): two 8-GPU pods
    fit the cluster's free GPUs, one on each domain, but no one domain, so none binds
    until a domain frees; then both bind in it. The pods in the way serve (a higher
    priority): the gang cannot preempt them."""
    for node in ("gpu-0000", "gpu-0002"):
        await submit(cosched_api, gang(cosched_ns, f"fill-{node}", pods=1, gpus=4,
                                       cls="inference", node=node))
    attempt = gang(cosched_ns, "linked", pods=2, gpus=8, cls="training")
    await submit(cosched_api, attempt)

    async def rejected() -> bool:
        return any("gets rejected" in m for m in await events(cosched_api, cosched_ns))

    await until(rejected, within=WITHIN)
    assert set(bound(await pods_of(cosched_api, cosched_ns))) == {
        "fill-gpu-0000-0", "fill-gpu-0002-0"}

    await client.CoreV1Api(cosched_api).delete_namespaced_pod(
        "fill-gpu-0002-0", cosched_ns, grace_period_seconds=0)

    async def placed() -> dict[str, str]:
        got = bound(await pods_of(cosched_api, cosched_ns))
        return {n: got[n] for n in attempt.pod_names if n in got}

    async def whole() -> bool:
        return len(await placed()) == 2

    await until(whole, within=WITHIN)
    assert sorted((await placed()).values()) == ["gpu-0002", "gpu-0003"]
