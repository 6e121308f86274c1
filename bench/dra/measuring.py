"""The controller on a cluster whose GPUs are DRA devices only, pure (no control plane):
5,000 nodes of 8 GPUs in NVLink domains of 8, one ResourceSlice each (40,000 devices, with
the attributes NVIDIA's driver publishes), every GPU held by a running pod through an
allocated claim (half the domains by 1-GPU pods, half by 8-GPU gang pods), CPU pods with
a claim of a device class no policy maps: 50,000 pods and 50,000 allocated claims in all.
200 training gangs of 2-16 pods of 8 GPUs wait, their claims made from a template.

Fed as the watches feed the controller (`Cache`: raw JSON of nodes, slices, claim
templates, claims and pods), it prints, beside the same cluster with the GPUs as the
extended resource `nvidia.com/gpu`:
1. the time to take in the listed cluster;
2. one decision round, preemption included (goal: p99 <= 100 ms), `--churn` running pods
   ending and starting again before each;
3. the process's peak resident memory, which holds what the controller holds (goal:
   <= 300 MiB).

Times are the process's CPU time.

    .venv/bin/python -m bench.dra [--nodes 5000] [--gangs 200] [--rounds 20] [--churn 100]
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing
import random
import resource
import statistics
import time
from collections.abc import Iterator
from typing import Any

from bench.common import pct
from bench.controller.measuring import GPU
from tests.builders import SCAVENGER, SEAL, TRAINING, iso, raw_member
from tests.paths import POLICIES
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.shells.cache import Cache
from webhook.keys import GANG_LABEL
from webhook.policy.loading import load_policy
from webhook.sandbox.nodes import Shape, topology

NOW = time.time()
TEMPLATE = "eight-gpus"


def nodes(count: int, dra: bool) -> list[dict[str, Any]]:
    raw = topology(Shape(nodes=count, nodes_per_domain=8, domains_per_block=4,
                         taint_gpus=False))
    for n in raw:
        n.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True"}]
        if dra:
            n["status"]["allocatable"].pop(GPU, None)
    return raw


def gpu_slice(node: str) -> dict[str, Any]:
    """One node's GPUs as NVIDIA's DRA driver publishes them."""
    devices = [{"name": f"gpu-{i}", "attributes": {
        "type": {"string": "gpu"}, "index": {"int": i}, "minor": {"int": i},
        "uuid": {"string": f"GPU-{node}-{i:02d}"}, "productName": {"string": "NVIDIA H100"},
        "brand": {"string": "Nvidia"}, "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"}, "driverVersion": {"version": "570.0.0"},
        "cudaDriverVersion": {"version": "12.8.0"}, "pcieBusID": {"string": f"0000:{i:02x}:00.0"}},
        "capacity": {"memory": {"value": "80Gi"}}} for i in range(8)]
    return {"metadata": {"name": f"{node}-gpu.nvidia.com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1}}}


def claim(name: str, device_class: str, count: int, node: str) -> dict[str, Any]:
    """A claim made for a pod from a template, allocated on `node`."""
    return {"metadata": {"name": name, "namespace": "scavenge"},
            "spec": {"devices": {"requests": [{"name": "devices", "exactly": {
                "deviceClassName": device_class, "allocationMode": "ExactCount",
                "count": count}}]}},
            "status": {"allocation": {"devices": {"results": [
                {"request": "devices", "driver": "gpu.nvidia.com", "pool": node,
                 "device": f"gpu-{i}"} for i in range(count)]}}}}


def template(name: str, device_class: str, count: int, ns: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns}, "spec": {"spec": {"devices": {
        "requests": [{"name": "devices", "exactly": {"deviceClassName": device_class,
                                                     "allocationMode": "ExactCount",
                                                     "count": count}}]}}}}


def running(name: str, node: str, gpus: int, started: float, dra: bool,
            gang: str | None = None) -> dict[str, Any]:
    """A bound pod holding GPUs through a claim made from a template (or requesting
    them), or, with `gpus` 0, a CPU pod with a claim of a class no policy maps."""
    requests: dict[str, str] = {"cpu": "1"}
    spec: dict[str, Any] = {"nodeName": node, "priority": SCAVENGER if gpus else 0}
    if dra:
        spec["resourceClaims"] = [{"name": "devices",
                                   "resourceClaimTemplateName": f"gpus-{gpus}"}]
    elif gpus:
        requests[GPU] = str(gpus)
    spec["containers"] = [{"name": "main", "resources": {"requests": requests}}]
    return {"metadata": {"name": name, "namespace": "scavenge", "uid": f"uid-{name}",
                         "labels": {GANG_LABEL: gang} if gang else {}},
            "spec": spec,
            "status": {"phase": "Running", "startTime": iso(started),
                       "resourceClaimStatuses": [{"name": "devices",
                                                  "resourceClaimName": f"{name}-devices"}]
                       if dra else []}}


def objects(raw_nodes: list[dict[str, Any]], gangs: int, dra: bool, rng: random.Random
            ) -> Iterator[tuple[dict[str, Any], dict[str, Any] | None]]:
    """Each pod, with the claim made for it: every GPU held, 10 pods a node, then the
    waiting gangs. Made one at a time: the watches hand the controller pages, never the
    whole cluster as JSON."""
    for d in range(0, len(raw_nodes), 8):
        gang = f"sg{d}" if (d // 8) % 2 else None
        started = NOW - rng.uniform(1, 10) * 3600
        for n in raw_nodes[d:d + 8]:
            name = n["metadata"]["name"]
            held = [(f"{gang}-{name}", 8)] if gang else [(f"s-{name}-{i}", 1) for i in range(8)]
            cpu = [(f"cpu-{name}-{i}", 0) for i in range(10 - len(held))]
            for pod, gpus in held + cpu:
                yield (running(pod, name, gpus, started, dra, gang if gpus == 8 else None),
                       claim(f"{pod}-devices", "gpu.nvidia.com" if gpus else "nic.example.com",
                             max(gpus, 1), name) if dra else None)
    for g in range(gangs):
        size = rng.choice((2, 4, 8, 16))
        for i in range(size):
            raw = raw_member(f"train{g}", i, 0 if dra else 8, size, ns="train",
                             priority=TRAINING)
            if dra:
                raw["spec"]["resourceClaims"] = [{"name": "gpus",
                                                  "resourceClaimTemplateName": TEMPLATE}]
            yield raw, None


Measured = tuple[float, list[float], float, float]


def measure(args: argparse.Namespace, dra: bool) -> Measured:
    """(ms to take the cluster in, round times in ms, ms of the first round, peak MiB)."""
    rng = random.Random(5)
    raw_nodes = nodes(args.nodes, dra)
    policy = load_policy(POLICIES)
    started = time.process_time()
    cache = Cache(policy.counted(), SEAL, policy.device_kinds)
    cache.list_nodes([NodeInfo.parse(n) for n in raw_nodes])
    if dra:
        # As the watches list them: each object parsed as its page arrives.
        cache.list_slices([cache.parse_slice(gpu_slice(n["metadata"]["name"]))
                           for n in raw_nodes])
        templates = cache.parse_claim("ResourceClaimTemplate")
        cache.list_claims("ResourceClaimTemplate")(
            [templates(template(f"gpus-{g}", "gpu.nvidia.com" if g else "nic.example.com",
                                max(g, 1), "scavenge")) for g in (0, 1, 8)]
            + [templates(template(TEMPLATE, "gpu.nvidia.com", 8, "train"))])
    pods, claims, parse_claim = [], [], cache.parse_claim("ResourceClaim")
    for pod, made in objects(raw_nodes, args.gangs, dra, rng):
        pods.append(cache.parse_pod(pod))
        if made is not None:
            claims.append(parse_claim(made))
    cache.list_claims("ResourceClaim")(claims)
    cache.list_pods(pods)
    taken = (time.process_time() - started) * 1000
    del raw_nodes, pods, claims
    gc.collect()
    gc.freeze()
    tracked = cache.cluster
    held = [key for key in tracked.pods if tracked.occupancy.gpus_of.get(key)]
    state = QueueState(preemption=PreemptionSettings(delay=0))
    started = time.process_time()
    decide(tracked, {}, NOW, state=state)
    first = (time.process_time() - started) * 1000
    times = []
    for _ in range(args.rounds):
        for key in rng.sample(held, args.churn):
            again = tracked.pods[key]
            tracked.drop_pod(key)
            tracked.put_pod(again)
        started = time.process_time()
        decide(tracked, {}, NOW, state=state)
        times.append((time.process_time() - started) * 1000)
    return taken, times, first, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _apart(args: argparse.Namespace, dra: bool) -> Measured:
    """`measure` in a process of its own, so that each peak is its own."""
    with multiprocessing.get_context("fork").Pool(1) as pool:
        return pool.apply(measure, (args, dra))


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dra")
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--churn", type=int, default=100)
    args = parser.parse_args()
    for dra in (False, True):
        taken, times, first, peak = _apart(args, dra)
        kind = "DRA devices (slices, claims)" if dra else "nvidia.com/gpu (baseline)"
        print(f"{kind}: {args.nodes:,} nodes, {args.gangs} waiting gangs: took the listed "
              f"cluster in {taken:,.0f} ms; the first round {first:.1f} ms; then one round "
              f"p50 {statistics.median(times):.1f} ms, p99 {pct(times, 0.99):.1f} ms "
              f"({args.rounds} rounds, {args.churn} pods changed before each); peak "
              f"resident memory {peak:.0f} MiB")
    return 0
