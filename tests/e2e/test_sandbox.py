"""The README's first command: `airlock sandbox up --demo` brings up the real control plane
with Airlock wired in, creates the example workloads and prints where they landed;
`status` and `down` manage it. Run as a newcomer would, in a subprocess."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import dra_pod, pod
from tests.commands import run_airlock
from tests.kube import (
    all_bound,
    allocated,
    claims_of,
    create_gang,
    create_template,
    fresh_namespaces,
    pods_of,
    read_pod,
    until,
)
from webhook.keys import IGNORE_NAMESPACE_LABEL, PLACEMENT_ANNOTATION
from webhook.pools import CLIQUE_LABEL, COUNT_LABEL, MEMORY_LABEL, PRODUCT_LABEL
from webhook.sandbox.binaries import Binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.devices import CHANNEL_DRIVER, GPU_CLASS, GPU_DRIVER, NIC_DRIVER
from webhook.sandbox.launching import alive


def sandbox(*args: str) -> subprocess.CompletedProcess[str]:
    return run_airlock("sandbox", *args)


@pytest.fixture
def state_dir(binaries: Binaries, tmp_path: Path) -> Iterator[Path]:  # noqa: ARG001 (built)
    state = tmp_path / "sandbox"
    try:
        yield state
    finally:
        sandbox("down", "--state-dir", str(state))


def table(stdout: str) -> dict[str, dict[str, str]]:
    lines = stdout[stdout.index("POD "):].strip().splitlines()
    header = re.split(r"\s{2,}", lines[0])
    return {row[0]: dict(zip(header, row, strict=True))
            for row in (re.split(r"\s{2,}", line) for line in lines[1:])}


def priority(row: dict[str, str]) -> int:
    return int(row["PRIORITY"].rsplit("(", 1)[1].rstrip(")"))


def test_demo_lands_every_pod_and_the_gang_in_one_domain(state_dir: Path) -> None:
    up = sandbox("up", "--demo", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr[-3000:]
    assert re.search(r"^kubeconfig: \S+$", up.stdout, re.MULTILINE)
    pods = table(up.stdout)
    assert len(pods) == 7, up.stdout
    assert all(r["GATED"] == "no" and r["NODE"] != "-" for r in pods.values()), up.stdout
    # The real controllers made the Deployment's and the Job's pods; KWOK runs them all,
    # and the Job's pod has finished its 2 s run time.
    assert {r["STATUS"] for n, r in pods.items() if "embeddings" not in n} == {"Running"}, \
        up.stdout

    training = [r for name, r in pods.items() if name.startswith("research/llama-finetune")]
    inference = [r for name, r in pods.items() if name.startswith("serving/")]
    scavenger = [r for name, r in pods.items() if name.startswith("research/embeddings")]
    assert (len(training), len(inference), len(scavenger)) == (4, 2, 1)
    assert all(re.fullmatch(r"serving/vllm-llama-[a-z0-9]+-[a-z0-9]{5}", n)
               for n in pods if n.startswith("serving/")), up.stdout
    assert scavenger[0]["STATUS"] == "Succeeded", up.stdout
    assert {r["CLASS"] for r in training} == {"training"}
    assert {r["CLASS"] for r in inference} == {"inference"}
    assert {r["CLASS"] for r in scavenger} == {"scavenger"}
    # The gang is pinned to one NVLink domain, whole.
    assert len({r["DOMAIN (nvlink / block)"].split(" / ")[0] for r in training}) == 1
    assert min(map(priority, inference)) > max(map(priority, training)) \
        > max(map(priority, scavenger))


def test_status_and_down_manage_what_up_started(state_dir: Path) -> None:
    up = sandbox("up", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr[-3000:]
    status = sandbox("status", "--state-dir", str(state_dir))
    assert status.returncode == 0, status.stdout
    assert "processes: 7/7 running" in status.stdout
    processes = json.loads((state_dir / "state.json").read_text())["processes"]
    names = ["etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok",
             "airlock-webhook", "airlock-controller"]
    assert [p["name"] for p in processes] == names
    for name in names:  # one line each, saying it runs and where it logs
        assert re.search(rf"^  {name} +pid \d+ +running  \S+\.log$", status.stdout,
                         re.MULTILINE), status.stdout
    pids = [p["pid"] for p in processes]
    assert all(alive(p) for p in pids)
    # `kubectl airlock` reads the policy the sandbox runs from its ConfigMap, as on any
    # cluster that runs Airlock.
    kubeconfig = re.search(r"^kubeconfig: (\S+)$", up.stdout, re.MULTILINE)
    assert kubeconfig, up.stdout
    queues = subprocess.run([str(Path(sys.executable).parent / "kubectl-airlock"), "queues",
                             "-o", "json", "--kubeconfig", kubeconfig[1]],
                            capture_output=True, text=True, timeout=120, check=False)
    assert queues.returncode == 0, queues.stderr
    assert [q["name"] for q in json.loads(queues.stdout)["queues"]] == ["default"]

    down = sandbox("down", "--state-dir", str(state_dir))
    assert down.returncode == 0
    assert "the sandbox is down" in down.stdout
    assert not any(alive(p) for p in pids)
    assert not state_dir.exists()
    after = sandbox("status", "--state-dir", str(state_dir))
    assert after.returncode == 1
    assert "not up" in after.stdout


async def _gang_runs(kubeconfig: Path, ns: str, gang: str) -> None:
    """A gang created now is gated by the webhook and lifted whole by the controller,
    which records its placement (on one member) as it lifts the gates."""
    async with await from_kubeconfig(kubeconfig) as api:
        with contextlib.suppress(ApiException):  # 409: made before an earlier restart
            await client.CoreV1Api(api).create_namespace(body={"metadata": {"name": ns}})
        await create_gang(api, ns, gang, 2, gpus=1)  # 8 gangs in the 32 GPUs
        await until(lambda: all_bound(api, ns, f"{gang}-", 2), within=60)
        assert any(PLACEMENT_ANNOTATION in p["metadata"]["annotations"]
                   for p in await pods_of(api, ns, f"{gang}-"))


def test_restart_starts_each_part_again_in_place_with_its_state(state_dir: Path) -> None:
    up = sandbox("up", "--state-dir", str(state_dir), "--nodes", "4")
    assert up.returncode == 0, up.stderr[-3000:]
    kubeconfig = state_dir / "admin.kubeconfig"
    asyncio.run(_gang_runs(kubeconfig, "before", "g"))
    for i, component in enumerate(("etcd", "apiserver", "scheduler", "controller-manager",
                                   "kwok", "webhook", "controller")):
        pids = {p["name"]: p["pid"] for p in
                json.loads((state_dir / "state.json").read_text())["processes"]}
        restarted = sandbox("restart", component, "--state-dir", str(state_dir))
        assert restarted.returncode == 0, restarted.stderr
        name = re.match(r"(\S+) restarted \(pid (\d+)\)", restarted.stdout)
        assert name, restarted.stdout
        assert not alive(pids[name[1]])
        assert alive(int(name[2]))
        status = sandbox("status", "--state-dir", str(state_dir))
        assert "processes: 7/7 running" in status.stdout, status.stdout
        # What was stored before is still there, and the whole path still works.
        assert re.search(r"^before/g-0 ", status.stdout, re.MULTILINE), status.stdout
        asyncio.run(_gang_runs(kubeconfig, "after", f"after{i}"))
    unknown = sandbox("restart", "karpenter", "--state-dir", str(state_dir))
    assert unknown.returncode == 2
    assert "invalid choice" in unknown.stderr


H100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4"


async def _mixed(kubeconfig: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]],
                                            dict[str, Any]]:
    """The nodes, the ResourceSlices, and a pod that selects an L4 by its product label
    and claims one GPU, once it runs (in a namespace Airlock leaves alone)."""
    async with await from_kubeconfig(kubeconfig) as api:
        nodes = (await (await client.CoreV1Api(api).list_node(
            _preload_content=False)).json())["items"]
        slices = (await (await client.ResourceV1Api(api).list_resource_slice(
            _preload_content=False)).json())["items"]
        async with fresh_namespaces(api, "e2e-pools") as make:
            ns = await make({IGNORE_NAMESPACE_LABEL: "true"})
            await create_template(api, ns, "one-gpu", GPU_CLASS, 1)
            await client.CoreV1Api(api).create_namespaced_pod(ns, dra_pod(
                "server", "one-gpu", nodeSelector={PRODUCT_LABEL: L4}))

            async def runs() -> bool:
                pod = await read_pod(api, ns, "server")
                return bool((pod.get("status") or {}).get("phase") == "Running")
            await until(runs, within=60)
            pod = await read_pod(api, ns, "server")
            devices = allocated((await claims_of(api, ns, pod))[0], pod)
        return nodes, slices, {"node": pod["spec"]["nodeName"], "devices": devices}


def test_pools_of_two_models_label_their_nodes_and_devices_apart(state_dir: Path) -> None:
    up = sandbox("up", "--pools", "h100=2x8,l4=2x1", "--dra", "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr[-3000:]
    assert "4 fake GPU nodes, as DRA devices (h100: 2 x 8 NVIDIA-H100-80GB-HBM3, NVLink " \
        "domains of 4; l4: 2 x 1 NVIDIA-L4)" in up.stderr
    kubeconfig = Path(json.loads((state_dir / "state.json").read_text())["kubeconfig"])
    nodes, slices, server = asyncio.run(_mixed(kubeconfig))
    labels = {n["metadata"]["name"]: n["metadata"]["labels"] for n in nodes}
    assert {name: (got[PRODUCT_LABEL], got[COUNT_LABEL], got[MEMORY_LABEL],
                   got.get(CLIQUE_LABEL)) for name, got in labels.items()} == {
        "h100-0000": (H100, "8", "81559", "clique-0"),
        "h100-0001": (H100, "8", "81559", "clique-0"),
        "l4-0000": (L4, "1", "23034", None), "l4-0001": (L4, "1", "23034", None)}
    products = {(s["spec"]["driver"], s["spec"]["nodeName"]):
                [d["attributes"].get("productName", {}).get("string")
                 for d in s["spec"]["devices"]] for s in slices}
    assert products == {
        **{(GPU_DRIVER, n): ["NVIDIA H100 80GB HBM3"] * 8 for n in ("h100-0000", "h100-0001")},
        **{(GPU_DRIVER, n): ["NVIDIA L4"] for n in ("l4-0000", "l4-0001")},
        # IMEX channels only on the nodes with NVLink between them.
        **{(CHANNEL_DRIVER, n): [None] for n in ("h100-0000", "h100-0001")},
        # An RDMA NIC beside each GPU, as dranet publishes them (no product of theirs).
        **{(NIC_DRIVER, n): [None] * 8 for n in ("h100-0000", "h100-0001")},
        **{(NIC_DRIVER, n): [None] for n in ("l4-0000", "l4-0001")}}
    # The real scheduler reads the product label: the pod that selects an L4 gets one.
    assert server["node"].startswith("l4-")
    assert [(r["pool"], r["device"]) for r in server["devices"]] == [(server["node"], "gpu-0")]


async def _grown(kubeconfig: Path) -> list[dict[str, str]]:
    """The labels of the nodes Karpenter launched for two pods that each select an L4's
    only GPU, where one L4 node stands (in a namespace Airlock leaves alone)."""
    async with await from_kubeconfig(kubeconfig) as api:
        core = client.CoreV1Api(api)
        async with fresh_namespaces(api, "e2e-pools") as make:
            ns = await make({IGNORE_NAMESPACE_LABEL: "true"})
            for name in ("server-0", "server-1"):
                await core.create_namespaced_pod(ns, pod(name, ns).gpus(1).set(
                    "nodeSelector", {PRODUCT_LABEL: L4}).set("tolerations", [
                        {"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}]).build())
            await until(lambda: all_bound(api, ns, "server-", 2), within=180)
            nodes = (await (await core.list_node(_preload_content=False)).json())["items"]
            return [n["metadata"]["labels"] for n in nodes
                    if "karpenter.sh/nodepool" in n["metadata"]["labels"]]


def test_karpenter_grows_only_the_pool_a_pod_selects(state_dir: Path) -> None:
    up = sandbox("up", "--pools", "h100=1x8,l4=1x1", "--autoscaler", "karpenter",
                 "--state-dir", str(state_dir))
    assert up.returncode == 0, up.stderr[-3000:]
    assert "NodePool h100 launches h100-8x-h100 nodes, NodePool l4 launches l4-1x-l4 nodes" \
        in up.stderr
    kubeconfig = Path(json.loads((state_dir / "state.json").read_text())["kubeconfig"])
    grown = asyncio.run(_grown(kubeconfig))
    assert grown, "no node launched"
    for labels in grown:  # one, unless Karpenter saw both pods pending at once
        assert (labels["karpenter.sh/nodepool"], labels["node.kubernetes.io/instance-type"],
                labels[PRODUCT_LABEL], labels[COUNT_LABEL]) == ("l4", "l4-1x-l4", L4, "1")
        assert CLIQUE_LABEL not in labels
