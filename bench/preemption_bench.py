"""Preemption benchmark, pure (no control plane). Prints:

1. one decision round on a full cluster: 5,000 nodes of 8 GPUs (NVLink domains of 8),
   50,000 running pods (scavenger single pods and gangs holding every GPU, plus CPU pods),
   200 waiting training gangs of 2-16 pods; preemption included (goal: p99 <= 100 ms);
2. planning the victims for one gang on that cluster (goal: p99 <= 20 ms).

`--singles N` adds N waiting single pods of a class that queues (1-GPU scavenger pods,
gated by the webhook), each a gang of one to the round.

Times are the process's CPU time, not wall time: on a shared machine the wall clock
measures the neighbours as much as the code.

    .venv/bin/python -m bench.preemption_bench [--nodes 5000] [--gangs 200] [--rounds 20]
        [--singles 0]
"""

from __future__ import annotations

import argparse
import datetime
import gc
import random
import statistics
import time
from typing import Any

from bench.controller_bench import GPU, gang_pods, pct
from tests.builders import queued
from webhook.controller.deciding import POLICY_DEFAULT, QueueState, decide
from webhook.controller.objects import NodeInfo, PodInfo
from webhook.controller.preempting import Candidates, PreemptionSettings, Preemptor
from webhook.controller.quotas import Ledger, Quotas
from webhook.controller.snapshot import Snapshot
from webhook.controller.tracking import Tracked
from webhook.keys import GANG_LABEL
from webhook.sandbox.nodes import Shape, topology

NOW = time.time()
SCAVENGER, TRAINING = 1000, 50000


def _iso(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pod(name: str, node: str, gpus: int, started: float, gang: str | None = None
         ) -> PodInfo:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "scavenge",
                     "labels": {GANG_LABEL: gang} if gang else {}},
        "spec": {"nodeName": node, "priority": SCAVENGER if gpus else 0,
                 "containers": [{"resources": {"requests": {
                     **({GPU: str(gpus)} if gpus else {}), "cpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": _iso(started)}}
    return PodInfo.parse(raw)


def full_cluster(node_count: int, rng: random.Random) -> tuple[list[NodeInfo], list[PodInfo]]:
    """Every GPU held: half the domains by single 1-GPU pods, half by 8-node gangs; CPU
    pods bring every node to 10 pods."""
    raw_nodes = topology(Shape(nodes=node_count, nodes_per_domain=8, domains_per_block=4,
                               taint_gpus=False))
    for raw in raw_nodes:  # Ready, as KWOK would report them
        raw.setdefault("status", {})["conditions"] = [{"type": "Ready", "status": "True"}]
    nodes = [NodeInfo.parse(n) for n in raw_nodes]
    pods: list[PodInfo] = []
    for d in range(0, node_count, 8):
        domain = nodes[d:d + 8]
        gang = f"sg{d}" if (d // 8) % 2 else None
        started = NOW - rng.uniform(1, 10) * 3600
        for n in domain:
            if gang:
                pods.append(_pod(f"{gang}-{n.name}", n.name, 8, started, gang))
                extra = 9
            else:
                pods += [_pod(f"s-{n.name}-{i}", n.name, 1, NOW - rng.uniform(1, 10) * 3600)
                         for i in range(8)]
                extra = 2
            pods += [_pod(f"cpu-{n.name}-{i}", n.name, 0, started) for i in range(extra)]
    return nodes, pods


def waiting(count: int, rng: random.Random) -> list[PodInfo]:
    pods = []
    for g in range(count):
        for raw in gang_pods(f"train{g}", rng.choice((2, 4, 8, 16)), 8, ns="train"):
            raw["spec"]["priority"] = TRAINING
            pods.append(PodInfo.parse(raw))
    return pods


def singles(count: int) -> list[PodInfo]:
    return [queued(f"scav{i}", 1, ns="scavenge", preemptionPolicy="Never")
            for i in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--first-plans", type=int, default=50,
                        help="gangs planned each as the first of a round")
    parser.add_argument("--singles", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(5)
    nodes, running = full_cluster(args.nodes, rng)
    gangs = waiting(args.gangs, rng)
    pods = running + gangs + singles(args.singles)
    started = time.process_time()
    cluster = Tracked.of(nodes, pods, POLICY_DEFAULT)
    print(f"tracking {len(nodes):,} nodes and {len(pods):,} pods once: "
          f"{(time.process_time() - started) * 1000:.0f} ms CPU")
    # As the controller does once it has listed the cluster (`running.py`).
    gc.collect()
    gc.freeze()
    state = QueueState(preemption=PreemptionSettings(delay=0))
    times, preempted = [], 0
    for _ in range(args.rounds):
        started = time.process_time()
        actions = decide(cluster, {}, NOW, state=state)
        times.append((time.process_time() - started) * 1000)
        preempted = sum(1 for a in actions if type(a).__name__ == "Preempt")
    print(f"{len(nodes):,} nodes, {len(running):,} running pods, {args.gangs} waiting gangs, "
          f"{args.singles} waiting single pods: "
          f"one round p50 {statistics.median(times):.1f} ms, p99 {pct(times, 0.99):.1f} ms "
          f"({preempted} preemptions per round, {args.rounds} rounds)")

    quotas = Quotas()
    members: dict[str, list[PodInfo]] = {}
    for p in gangs:
        members.setdefault(p.gang or "", []).append(p)

    def preemptor() -> Preemptor:
        return Preemptor(Snapshot(cluster),
                         Ledger(quotas, cluster.namespace_gpus, cluster.capacity),
                         Candidates(cluster, quotas, NOW, PreemptionSettings()))
    # The first plan of a round builds the units and ranks the domains it looks at;
    # later plans of the same round reuse them.
    first: list[float] = []
    later: list[float] = []
    shared = preemptor()
    for i, gang in enumerate(members.values()):
        fresh = preemptor() if i < args.first_plans else None
        for planner, times_ in ((fresh, first), (shared, later)):
            if planner is not None:
                started = time.process_time()
                planner.plan(gang, "default", frozenset())
                times_.append((time.process_time() - started) * 1000)
    for label, times_ in (("the first plan of a round", first),
                          ("a later plan of the same round", later)):
        print(f"planning the victims for one gang, {label}: "
              f"p50 {statistics.median(times_):.2f} ms, p99 {pct(times_, 0.99):.2f} ms "
              f"({len(times_)} gangs of 2-16 pods)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
