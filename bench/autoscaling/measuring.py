"""Gangs that grow the cluster: the time from a gang's creation to all its pods Running,
on the Karpenter sandbox (`airlock sandbox up --autoscaler karpenter --nodes 2`, the
policy asking for capacity with placeholders), beside the same gangs on a static sandbox
with room for them all. Each gang (4 pods of 8 GPUs, training) is created once the one
before runs, so each one's time is its own: on the Karpenter sandbox, every gang needs 4
new nodes.

    .venv/bin/python -m bench.autoscaling [--gangs 10] [--size 4]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from kubernetes_asyncio import client

from bench.common import load, pct, policies_with, sandbox
from tests.builders import gang_pod, policy_yaml
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.nodes import POOL

GPU = "nvidia.com/gpu"
CAPACITY = policy_yaml("capacity", {"capacity": {"mode": "placeholders"}})


async def _running(core: client.CoreV1Api, ns: str, prefix: str, size: int) -> bool:
    response = await core.list_namespaced_pod(ns, _preload_content=False)
    pods = [p for p in (await response.json())["items"]
            if p["metadata"]["name"].startswith(prefix)]
    return len(pods) == size and all(p["status"].get("phase") == "Running" for p in pods)


async def _gangs(kubeconfig: Path, gangs: int, size: int, grow: bool) -> list[float]:
    """Seconds from each gang's creation to all its pods Running."""
    times = []
    async with await from_kubeconfig(kubeconfig) as api:
        core = client.CoreV1Api(api)
        if grow:
            # Room for every gang: the sandbox's NodePool stops at 64 GPUs.
            await client.CustomObjectsApi(api).patch_cluster_custom_object(
                "karpenter.sh", "v1", "nodepools", POOL,
                {"spec": {"limits": {GPU: str(8 * size * (gangs + 1))}}},
                _content_type="application/merge-patch+json")
        await wiring.create_namespace(api, "bench")
        for g in range(gangs):
            name = f"g{g}"
            started = time.monotonic()
            await asyncio.gather(*(core.create_namespaced_pod(
                "bench", body=gang_pod(name, i, size, cls="training")) for i in range(size)))
            deadline = started + 300
            while not await _running(core, "bench", f"{name}-", size):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"gang {name} not running after 300 s")
                await asyncio.sleep(0.1)
            times.append(time.monotonic() - started)
    return times


def measure(grow: bool, gangs: int, size: int, workdir: Path) -> list[float]:
    policies = policies_with(workdir / "policies", "92-capacity.yaml", CAPACITY)
    nodes, extra = (2, ("--autoscaler", "karpenter")) if grow else (size * gangs + 2, ())
    with sandbox(workdir / "sandbox", nodes, policies, extra) as up:
        return asyncio.run(_gangs(up.kubeconfig, gangs, size, grow))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.autoscaling")
    parser.add_argument("--gangs", type=int, default=10)
    parser.add_argument("--size", type=int, default=4, help="pods of 8 GPUs per gang")
    args = parser.parse_args()
    print(f"{args.gangs} gangs of {args.size} x 8 GPUs, one after another; {load()}")
    print(f"{'cluster':<44} {'p50':>7} {'p99':>7} {'mean':>7}  (s, creation to Running)")
    for grow, label in ((False, f"static, room for all ({args.size * args.gangs + 2} nodes)"),
                        (True, "Karpenter, from 2 nodes (placeholders)")):
        with tempfile.TemporaryDirectory(prefix="bench-autoscaling-") as tmp:
            times = measure(grow, args.gangs, args.size, Path(tmp))
        print(f"{label:<44} {pct(times, 0.5):>7.2f} {pct(times, 0.99):>7.2f} "
              f"{statistics.mean(times):>7.2f}", flush=True)
    print(load())
    return 0
