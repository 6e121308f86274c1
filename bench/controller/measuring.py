"""Controller benchmark. Prints, in one run:

1. pure decision time at 1,000 and 5,000 fake nodes (8 GPUs each, NVLink domains of 8
   nodes, 60% of GPUs busy): one round's snapshot, and fit per gang, p50/p99
   (goal: fit p99 <= 10 ms at 5,000 nodes);
2. on the real apiserver (with the real kube-scheduler binding what is let go):
   - the time from a gang's last member being created to all its gates lifted, p50/p99
     (goal: p99 <= 1 s);
   - in turns: raw PATCH throughput of the same client with the same writes in flight,
     bare (an annotation) and with the controller's own ungate patch, then pods let go
     per second by the controller lifting many waiting gangs (goal: >= 80% of the raw
     ungate PATCH; both are printed);
3. with --memory: the controller's resident memory with 5,000 nodes and 50,000 pods
   (goal: <= 300 MiB).

    .venv/bin/python -m bench.controller [--gangs 40] [--burst-gangs 100] [--turns 3]
        [--memory] [--pure-only]

With --sandbox-nodes N, instead, on `airlock sandbox up --nodes N` (KWOK running the
nodes and their pods): the sandbox is filled to 10 Running pods a node by the workloads
people run (DaemonSets, Deployments, Jobs, through kube-controller-manager, the
scheduler, Airlock and KWOK), then gangs are created one after another and timed from
the last member created to all members Running; the controller's resident memory is
read before and after.

    .venv/bin/python -m bench.controller --sandbox-nodes 5000 [--gangs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from kubernetes_asyncio import client

from bench.common import pct
from bench.controller.filling import at_scale
from tests.builders import raw_member
from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import decide
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.placement.fitting import fit
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import Record
from webhook.controller.shells.applying import WRITES_IN_FLIGHT
from webhook.controller.shells.patches import ungate_patch
from webhook.keys import (
    GANG_LABEL,
    GATE,
)
from webhook.kuberaw import json_of
from webhook.policy.model import DEFAULT_ACCELERATORS
from webhook.sandbox import wiring
from webhook.sandbox.binaries import ensure_binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import CLIQUE_LABEL, Shape, create_nodes, topology
from webhook.sandbox.processes import start_controller

GPU = "nvidia.com/gpu"
POLICIES = Path(__file__).resolve().parents[2] / "policies"


def gang_pods(name: str, size: int, gpus: int, ns: str = "bench", mode: str = "required"
              ) -> list[dict[str, Any]]:
    """A gang's members as the webhook leaves them (gated, size and domain recorded, the
    domain a must or, with `mode` "preferred", a wish)."""
    return [raw_member(name, i, gpus, size, ns=ns, mode=mode) for i in range(size)]


def ready_nodes(node_count: int) -> list[NodeInfo]:
    """The sandbox's GPU nodes in NVLink domains of 8, Ready as KWOK would report them
    (the pure benchmarks have no KWOK: without the condition no node is eligible)."""
    raw_nodes = topology(Shape(nodes=node_count, nodes_per_domain=8, domains_per_block=4,
                               taint_gpus=False))
    for raw in raw_nodes:
        raw.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True"}]
    return [NodeInfo.parse(n) for n in raw_nodes]


def pure_fit(node_count: int, rounds: int = 200) -> None:
    nodes = ready_nodes(node_count)
    rng = random.Random(7)
    busy = []
    for i, n in enumerate(nodes):
        used = rng.choice((0, 4, 8, 8))  # about 60% of GPUs in use
        if used:
            busy.append(PodInfo.parse({
                "metadata": {"name": f"busy-{i}", "namespace": "x"},
                "spec": {"nodeName": n.name, "containers": [{"resources": {
                    "requests": {GPU: str(used)}}}]}}))
    started = time.perf_counter()
    cluster = Tracked.of(nodes, busy, Accelerators.of(DEFAULT_ACCELERATORS))
    tracking_ms = (time.perf_counter() - started) * 1000
    started = time.perf_counter()
    snap = Snapshot(cluster)
    snapshot_ms = (time.perf_counter() - started) * 1000
    times = []
    for r in range(rounds):
        size = rng.choice((2, 4, 8, 16))
        pods = [PodInfo.parse(p) for p in gang_pods(f"g{r}", size, 8)]
        started = time.perf_counter()
        fit(pods, snap, CLIQUE_LABEL, "required")
        times.append((time.perf_counter() - started) * 1000)
    print(f"  {node_count:>5} nodes: tracking them and their pods {tracking_ms:.1f} ms once; "
          f"snapshot {snapshot_ms:.2f} ms per round; fit per gang "
          f"p50 {statistics.median(times):.2f} ms, p99 {pct(times, 0.99):.2f} ms "
          f"({rounds} gangs of 2-16 pods)")


def decide_round(node_count: int, waiting: int = 50, rounds: int = 5) -> None:
    """A whole round as the controller runs it: a snapshot of the tracked nodes and bound
    pods, then `waiting` gangs through the queue (each fitted, reserved, or told why
    not)."""
    nodes = ready_nodes(node_count)
    rng = random.Random(11)
    pods: list[PodInfo] = []
    for i, n in enumerate(nodes):
        for j in range(rng.choice((0, 1, 2, 2))):  # about 60% of GPUs in use, 4 per pod
            pods.append(PodInfo.parse({
                "metadata": {"name": f"busy-{i}-{j}", "namespace": "x"},
                "spec": {"nodeName": n.name, "containers": [{"resources": {
                    "requests": {GPU: "4", "cpu": "8"}}}]}}))
    for g in range(waiting):
        pods += [PodInfo.parse(p) for p in gang_pods(f"w{g}", rng.choice((2, 4, 8, 16)), 8)]
    cluster = Tracked.of(nodes, pods, Accelerators.of(DEFAULT_ACCELERATORS))
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        decide(cluster, {}, time.time())
        times.append((time.perf_counter() - started) * 1000)
    print(f"  {node_count:>5} nodes, {len(pods):,} pods: one round deciding {waiting} gangs "
          f"p50 {statistics.median(times):.1f} ms, max {max(times):.1f} ms "
          f"({statistics.median(times) / waiting:.2f} ms per gang)")


DOMAINS = 16  # the throughput cluster: 128 nodes of 8 GPUs, NVLink domains of 8 nodes


async def _clear(core: Any) -> None:
    # Force: with no kubelet a bound pod would otherwise never finish terminating.
    await core.delete_collection_namespaced_pod("bench", grace_period_seconds=0)


async def _patch_throughput(core: Any, n: int, ungate: bool) -> float:
    """Raw PATCH throughput of this apiserver with the same client and as many writes in
    flight as the controller keeps.

    - `ungate=False`: an annotation on pods that stay gated (the apiserver's bare cost);
    - `ungate=True`: the very JSON Patch the controller sends (test and remove the gate,
      pin the domain), each response read and decoded as the controller does; the
      scheduler then binds those pods, as it binds the controller's. The controller's
      figure is compared with this one: the same writes, the same cluster work after them.
    """
    made = await asyncio.gather(*(core.create_namespaced_pod("bench", body=b,
                                                             _preload_content=False)
                                  for b in gang_pods("raw", n, 1)))
    pods = [PodInfo.parse(await json_of(r)) for r in made]
    limit = asyncio.Semaphore(WRITES_IN_FLIGHT)

    async def one(i: int, pod: PodInfo) -> None:
        async with limit:
            if ungate:
                # Spread over the domains, as the controller's gangs are.
                record = Record(f"clique-{i % DOMAINS}", CLIQUE_LABEL, (), 0.0)
                body: Any = ungate_patch(pod, record)
                kind = "application/json-patch+json"
            else:
                body = {"metadata": {"annotations": {"bench": "1"}}}
                kind = "application/merge-patch+json"
            await json_of(await core.patch_namespaced_pod(
                pod.name, "bench", body=body, _content_type=kind, _preload_content=False))

    started = time.perf_counter()
    await asyncio.gather(*(one(i, p) for i, p in enumerate(pods)))
    rate = n / (time.perf_counter() - started)
    await _clear(core)
    return rate


async def _latency(core: Any, kubeconfig: Path, workdir: Path, gangs: int,
                   size: int) -> None:
    """Gangs of whole nodes, one after another: from the last member created to all
    gates lifted."""
    controller = start_controller(workdir, kubeconfig, POLICIES)
    try:
        await asyncio.sleep(3)  # let it list and start leading
        lifted: dict[str, float] = {}
        last_created: dict[str, float] = {}
        # Gangs that finish are deleted so the next ones fit.
        for g in range(gangs):
            name = f"gang-{g}"
            for body in gang_pods(name, size, 8):
                await core.create_namespaced_pod("bench", body=body)
            last_created[name] = time.perf_counter()
            while True:
                pods = (await (await core.list_namespaced_pod(
                    "bench", label_selector=f"{GANG_LABEL}={name}",
                    _preload_content=False)).json())["items"]
                if all(not p["spec"].get("schedulingGates") for p in pods):
                    lifted[name] = time.perf_counter()
                    break
                await asyncio.sleep(0.01)
            await core.delete_collection_namespaced_pod(
                "bench", label_selector=f"{GANG_LABEL}={name}", grace_period_seconds=0)
    finally:
        controller.process.terminate()
        controller.process.wait()
    latency = [(lifted[g] - last_created[g]) * 1000 for g in lifted]
    print(f"  time from last member created to all gates lifted: p50 "
          f"{statistics.median(latency):.0f} ms, p99 {pct(latency, 0.99):.0f} ms "
          f"({len(lifted)} gangs of {size} pods x 8 GPUs, one after another)")


async def _burst(core: Any, kubeconfig: Path, workdir: Path, gangs: int, size: int) -> float:
    """Many complete gangs waiting at once (1-GPU pods, so all fit), then a controller
    starts and lifts them all: pods let go per second, from the first lift to the last."""
    for g in range(gangs):
        await asyncio.gather(*(core.create_namespaced_pod("bench", body=b)
                               for b in gang_pods(f"burst-{g}", size, 1)))
    listed = await (await core.list_namespaced_pod("bench", _preload_content=False)).json()
    waiting = {p["metadata"]["name"] for p in listed["items"]
               if any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])}
    # A watch, not polling: the bench must not take the CPU the controller needs.
    stream = await core.list_namespaced_pod(
        "bench", watch=True, resource_version=listed["metadata"]["resourceVersion"],
        _preload_content=False)
    controller = start_controller(workdir, kubeconfig, POLICIES)
    try:
        first: float | None = None
        async for line in stream.content:
            obj = orjson.loads(line)["object"]
            gates = [g["name"] for g in obj["spec"].get("schedulingGates") or []]
            if GATE not in gates and obj["metadata"]["name"] in waiting:
                waiting.discard(obj["metadata"]["name"])
                first = first or time.perf_counter()
                if not waiting:
                    break
        stream.close()
        elapsed = time.perf_counter() - (first or time.perf_counter())
    finally:
        controller.process.terminate()
        controller.process.wait()
    await _clear(core)
    return gangs * size / elapsed


async def _admissions(plane: ControlPlane, args: argparse.Namespace, workdir: Path) -> None:
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        core = client.CoreV1Api(api)
        await wiring.create_namespace(api, "bench")
        await create_nodes(api, topology(Shape(nodes=DOMAINS * 8, nodes_per_domain=8,
                                               taint_gpus=False)))
        kubeconfig = await wiring.controller_kubeconfig(api, plane.url, plane.ca_file,
                                                        workdir / "controller.kubeconfig")
        await _latency(core, kubeconfig, workdir, args.gangs, args.gang_size)
        # Throughput: the two raw baselines and the controller, in turns, so a slow
        # moment of the machine falls on all three alike; the median of the turns.
        pods = args.burst_gangs * args.gang_size
        ratios: list[float] = []
        bare_ratios: list[float] = []
        for turn in range(args.turns):
            bare = await _patch_throughput(core, pods, ungate=False)
            raw = await _patch_throughput(core, pods, ungate=True)
            ours = await _burst(core, kubeconfig, workdir, args.burst_gangs, args.gang_size)
            ratios.append(ours / raw)
            bare_ratios.append(ours / bare)
            print(f"  turn {turn + 1}: raw PATCH {bare:.0f} pods/s annotating gated pods, "
                  f"{raw:.0f} pods/s with the controller's own ungate patch (the scheduler "
                  f"then binds them); controller {ours:.0f} pods/s "
                  f"({ours / args.gang_size:.1f} gangs/s) = {ours / raw:.0%} of the raw "
                  f"ungate PATCH, {ours / bare:.0%} of the bare one")
        print(f"  controller, median of {args.turns} turns of {pods} pods: "
              f"{statistics.median(ratios):.0%} of the raw ungate PATCH (goal: >= 80%), "
              f"{statistics.median(bare_ratios):.0%} of the bare one")


async def _memory(plane: ControlPlane, workdir: Path, nodes: int, pods: int) -> None:
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        core = client.CoreV1Api(api)
        await wiring.create_namespace(api, "mem")
        names = [n["metadata"]["name"] for n in topology(Shape(nodes=nodes, taint_gpus=False),
                                                         prefix="mem")]
        await create_nodes(api, topology(Shape(nodes=nodes, taint_gpus=False), prefix="mem"))
        limit = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with limit:
                await core.create_namespaced_pod("mem", body={
                    "metadata": {"name": f"p-{i}", "labels": {"app": f"a{i % 50}"}},
                    "spec": {"nodeName": names[i % nodes], "containers": [{
                        "name": "c", "image": "x",
                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}})

        await asyncio.gather(*(one(i) for i in range(pods)))
        kubeconfig = await wiring.controller_kubeconfig(api, plane.url, plane.ca_file,
                                                        workdir / "controller.kubeconfig")
    controller = start_controller(workdir, kubeconfig, POLICIES)
    try:
        await asyncio.sleep(30)
        status = await asyncio.to_thread(
            Path(f"/proc/{controller.process.pid}/status").read_text)
        rss = next(line for line in status.splitlines() if line.startswith("VmRSS"))
        print(f"  controller with {nodes} nodes and {pods} pods: {rss.split(':')[1].strip()}")
    finally:
        controller.process.terminate()
        controller.process.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--gangs", type=int, default=40,
                        help="gangs of whole nodes timed one after another (latency)")
    parser.add_argument("--burst-gangs", type=int, default=100,
                        help="gangs waiting at once for the throughput turns (1-GPU pods; "
                             f"at most {DOMAINS * 64} GPUs in all)")
    parser.add_argument("--turns", type=int, default=3)
    parser.add_argument("--gang-size", type=int, default=8)
    parser.add_argument("--memory", action="store_true")
    parser.add_argument("--pure-only", action="store_true",
                        help="only the pure decision timings; no control plane")
    parser.add_argument("--sandbox-nodes", type=int, default=0, metavar="N",
                        help="instead: on `airlock sandbox up --nodes N`, filled to 10 "
                             "Running pods a node, gangs to Running and the controller's RSS")
    parser.add_argument("--fill-within", type=float, default=3600.0,
                        help="with --sandbox-nodes: seconds the fill may take at most")
    args = parser.parse_args()
    if args.sandbox_nodes:
        at_scale(args)
        return 0
    print("pure decision time:")
    for n in (1000, 5000):
        pure_fit(n)
    for n in (1000, 5000):
        decide_round(n)
    if args.pure_only:
        return 0
    binaries = ensure_binaries(lambda line: print(line, file=sys.stderr))
    print(f"on the real apiserver ({DOMAINS * 8} nodes of 8 GPUs, domains of 8 nodes):")
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(binaries) as plane:
        asyncio.run(_admissions(plane, args, Path(tmp)))
    if args.memory:
        print("memory:")
        with tempfile.TemporaryDirectory() as tmp, ControlPlane(binaries) as plane:
            asyncio.run(_memory(plane, Path(tmp), 5000, 50000))
    return 0
