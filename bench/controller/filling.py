"""The controller bench on `airlock sandbox up --nodes N` (`--sandbox-nodes N`): the
sandbox filled to 10 Running pods a node by the workloads people run, then gangs timed one
after another from the last member created to all members Running, and the controller's
resident memory read before and after."""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench.common import (
    PodClock,
    Sandbox,
    create,
    daemon_set,
    deployment,
    job,
    load,
    pct,
    pod_template,
    sandbox,
)
from tests.builders import gang_pod, pod
from webhook.kuberaw import json_of
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig

# Per node, as on a GPU cluster's nodes: 9 node agents (exporters, the device plugin, a
# log shipper, ...), and 1 more pod: 4 in 10 nodes serve a model (vLLM, all 8 GPUs), 4 in
# 10 run a batch sweep (8 GPUs, Airlock's scavenger class), 2 in 10 a CPU service. A GPU
# pod takes a whole node, so 1 node in 5 keeps its GPUs free for the gangs timed after.
AGENTS = 9
PER_OBJECT = 500  # replicas per Deployment, pods per Job


def _gpu_pods(nodes: int) -> int:
    """Pods of each GPU workload, serving and batch: each takes a whole node."""
    return nodes * 2 // 5


def _parts(total: int) -> list[int]:
    return [min(PER_OBJECT, total - i) for i in range(0, total, PER_OBJECT)]


def fill_objects(nodes: int) -> list[dict[str, Any]]:
    objs = [daemon_set(f"agent-{i}", "agents", pod_template(f"agent-{i}", tolerate_all=True))
            for i in range(AGENTS)]
    objs += [deployment(f"llm-{i}", "serving", n, pod_template(
        f"llm-{i}", image="vllm/vllm-openai:v0.8.5", gpus=8, cpu="8", memory="64Gi"))
        for i, n in enumerate(_parts(_gpu_pods(nodes)))]
    objs += [job(f"sweep-{i}", "batch", n, pod_template(
        f"sweep-{i}", image="ghcr.io/acme/sweep:1.0", gpus=8, cpu="8", memory="64Gi"))
        for i, n in enumerate(_parts(_gpu_pods(nodes)))]
    # Every node of the sandbox is a GPU node, so the CPU service tolerates their taint.
    objs += [deployment(f"web-{i}", "web", n, pod_template(
        f"web-{i}", image="ghcr.io/acme/web:1.0", tolerate_all=True))
        for i, n in enumerate(_parts(nodes // 5))]
    return objs


def _expected(obj: dict[str, Any], nodes: int) -> int:
    spec = obj["spec"]
    return nodes if obj["kind"] == "DaemonSet" else int(spec.get("replicas")
                                                        or spec.get("parallelism"))


async def _ready(api: client.ApiClient) -> int:
    """Pods Ready, as the workloads' own status counts them (cheap: no pod list)."""
    apps, batch = client.AppsV1Api(api), client.BatchV1Api(api)
    ready = 0
    for ds in (await apps.list_namespaced_daemon_set("agents")).items:
        ready += ds.status.number_ready or 0
    for ns in ("serving", "web"):
        for d in (await apps.list_namespaced_deployment(ns)).items:
            ready += d.status.ready_replicas or 0
    for j in (await batch.list_namespaced_job("batch")).items:
        ready += j.status.ready or 0
    return ready


async def _phases(api: client.ApiClient) -> dict[str, int]:
    """Every pod's phase, listed in pages (once: 50,000 pods are megabytes)."""
    core = client.CoreV1Api(api)
    counts: dict[str, int] = {}
    token = None
    while True:
        listed = await json_of(await core.list_pod_for_all_namespaces(
            limit=1000, _continue=token, _preload_content=False))
        for p in listed["items"]:
            phase = (p.get("status") or {}).get("phase", "Pending")
            counts[phase] = counts.get(phase, 0) + 1
        token = listed["metadata"].get("continue")
        if not token:
            return counts


async def fill(api: client.ApiClient, sbx: Sandbox, nodes: int, within: float) -> None:
    objs = fill_objects(nodes)
    want = sum(_expected(o, nodes) for o in objs)
    for ns in ("agents", "serving", "batch", "web"):
        await wiring.create_namespace(api, ns)
    cpu_before, started = sbx.cpu_all(), time.monotonic()
    for obj in objs:
        await create(api, obj)
    print(f"  filling: {len(objs)} objects for {want:,} pods ...", file=sys.stderr)
    ready, shown = 0, started
    while ready < want:
        if time.monotonic() - started > within:
            raise RuntimeError(f"{ready:,} of {want:,} pods Ready after {within:g}s")
        await asyncio.sleep(5)
        ready = await _ready(api)
        if time.monotonic() - shown >= 60:
            shown = time.monotonic()
            print(f"  {shown - started:5.0f}s: {ready:,} of {want:,} Ready ({load()})",
                  file=sys.stderr)
    seconds = time.monotonic() - started
    used = {n: sbx.cpu_seconds(n) - cpu_before[n] for n in cpu_before}
    print(f"  filled: {want:,} pods Ready in {seconds:.0f}s ({want / seconds:.0f} pods/s; "
          f"{load()}); phases {await _phases(api)}")
    print("  CPU seconds spent filling, by process: " + ", ".join(
        f"{n} {s:.0f}" for n, s in sorted(used.items(), key=lambda kv: -kv[1])))


async def timed_gangs(api: client.ApiClient, gangs: int, size: int) -> None:
    """Gangs of whole nodes, one after another, left running in the nodes the fill left
    free: from the last member created to all gates lifted, all bound, all Running."""
    await wiring.create_namespace(api, "train")
    core = client.CoreV1Api(api)
    lifted, bound, running = [], [], []
    async with PodClock(api, "train").running() as clock:
        # KWOK may still be catching up with the fill's pod events (its pod watch closed
        # for being slow, then listed afresh): a CPU pod first, so that is not timed as
        # the first gang's.
        started = time.monotonic()
        await core.create_namespaced_pod("train", body=pod("settle-0", "train").set(
            "tolerations", [{"operator": "Exists"}]).build())
        await clock.gang_running("train", "settle", 1, 900)
        print(f"  a CPU pod Running {time.monotonic() - started:.2f} s after the fill")
        for g in range(gangs):
            name = f"scale-{g}"
            await asyncio.gather(*(core.create_namespaced_pod("train", body=gang_pod(
                name, i, size)) for i in range(size)))
            last = time.monotonic()
            times = await clock.gang_running("train", name, size, 300)
            lifted.append(max(t.ungated or last for t in times) - last)
            bound.append(max(t.bound or last for t in times) - last)
            running.append(max(t.running or last for t in times) - last)
    for what, values in (("gates lifted", lifted), ("bound", bound), ("Running", running)):
        print(f"  last member created -> all {what}: p50 {statistics.median(values):.2f} s, "
              f"p99 {pct(values, 0.99):.2f} s")
    worst = max(range(gangs), key=running.__getitem__)
    print(f"  ({gangs} gangs of {size} pods x 8 GPUs, one after another; {load()}; the "
          f"slowest, scale-{worst}: lifted {lifted[worst]:.2f} s, bound {bound[worst]:.2f} s, "
          f"Running {running[worst]:.2f} s)")


def _rss(sbx: Sandbox, when: str) -> None:
    rss, peak = sbx.memory_mib("airlock-controller")
    print(f"  controller RSS {when}: {rss:.0f} MiB (peak {peak:.0f} MiB)")


async def _at_scale(sbx: Sandbox, args: argparse.Namespace) -> None:
    async with await from_kubeconfig(sbx.kubeconfig) as api:
        await fill(api, sbx, args.sandbox_nodes, args.fill_within)
        _rss(sbx, f"with {args.sandbox_nodes:,} nodes and the pods above")
        await timed_gangs(api, args.gangs, args.gang_size)
        _rss(sbx, "after the gangs")


def at_scale(args: argparse.Namespace) -> None:
    free = args.sandbox_nodes - 2 * _gpu_pods(args.sandbox_nodes)
    if args.gangs * args.gang_size > free:
        raise SystemExit(f"--gangs {args.gangs} of --gang-size {args.gang_size} need "
                         f"{args.gangs * args.gang_size} whole nodes; the fill leaves {free}")
    with tempfile.TemporaryDirectory() as tmp, \
            sandbox(Path(tmp) / "sandbox", args.sandbox_nodes) as sbx:
        print(f"on `airlock sandbox up --nodes {args.sandbox_nodes}` (up in "
              f"{sbx.up_seconds:.0f}s wall, {load()}):")
        asyncio.run(_at_scale(sbx, args))
