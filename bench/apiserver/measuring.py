"""Airlock as the kube-apiserver sees it: create pods through a real apiserver with the
webhook wired in, then read the apiserver's own histogram
`apiserver_admission_webhook_admission_duration_seconds` from its /metrics.

    .venv/bin/python -m bench.apiserver [--pods 1000]

Goal: p99 at or under 25 ms. It also prints the control plane's start time from cache.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

from kubernetes_asyncio import client

from bench.common import WEBHOOK_LATENCY, histograms, quantile
from tests.builders import pod
from webhook.policy.loading import load_policy
from webhook.sandbox import wiring
from webhook.sandbox.binaries import ensure_binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.processes import start_webhook

ROOT = Path(__file__).resolve().parents[2]


def bodies(n: int) -> list[dict[str, object]]:
    made = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            b = pod(f"train-{i}").gpus(8).label("gpu-airlock.io/gang-name", f"g{i}") \
                .annotation("gpu-airlock.io/gang-size", "8")
        elif kind == 1:
            b = pod(f"serve-{i}").gpus(1).image("vllm/vllm-openai:v0.6.3")
        else:
            b = pod(f"web-{i}").cpu("1", "1Gi")
        obj = b.build()
        del obj["metadata"]["namespace"]
        made.append(obj)
    return made


async def run(plane: ControlPlane, webhook_url: str, ca: bytes, n: int,
              concurrency: int) -> float:
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wiring.create_priority_classes(api, load_policy(ROOT / "policies"))
        await wiring.create_namespace(api, "bench")
        await wiring.apply_webhook_configurations(api, wiring.webhook_configurations(
            webhook_url, ca))
        core = client.CoreV1Api(api)
        limit = asyncio.Semaphore(concurrency)

        async def create(body: dict[str, object]) -> None:
            async with limit:
                await core.create_namespaced_pod("bench", body=body)

        started = time.monotonic()
        await asyncio.gather(*(create(b) for b in bodies(n)))
        return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.apiserver",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=1,
                        help="pods created at once (the webhook shares 2 cores with the "
                             "apiserver and etcd here)")
    args = parser.parse_args()
    binaries = ensure_binaries(lambda line: print(line, file=sys.stderr))
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(binaries) as plane:
        hook = start_webhook(Path(tmp), ROOT / "policies")
        try:
            seconds = asyncio.run(run(plane, hook.url, hook.certs.ca.read_bytes(), args.pods,
                                      args.concurrency))
            metrics = plane.metrics()
        finally:
            hook.running.process.terminate()
            hook.running.process.wait()
        print(f"control plane start (binaries cached): {plane.start_seconds:.1f} s")
        print(f"{args.pods} pods created in {seconds:.1f} s ({args.pods / seconds:.0f}/s, "
              f"{args.concurrency} at a time)")
        print(f"\n{WEBHOOK_LATENCY}, as measured by the apiserver:")
        print(f"{'webhook':<48}{'calls':>8}{'p50 ms':>10}{'p99 ms':>10}")
        for key, buckets in sorted(histograms(metrics).items()):
            print(f"{key:<48}{buckets[-1][1]:>8.0f}{quantile(buckets, 0.5) * 1000:>10.2f}"
                  f"{quantile(buckets, 0.99) * 1000:>10.2f}")
        print("\nGoal: p99 at or under 25 ms. Bucket bounds limit precision (interpolated).")
    return 0
