"""Preemption benchmark, pure (no control plane). Prints:

1. one decision round on a full cluster: 5,000 nodes of 8 GPUs (NVLink domains of 8),
   50,000 running pods (scavenger single pods and gangs holding every GPU, plus CPU pods),
   200 waiting training gangs of 2-16 pods; preemption included (goal: p99 <= 100 ms);
2. planning the victims for one gang on that cluster (goal: p99 <= 20 ms), and the work
   those victims would lose, in GPU-hours (the less, the better the plans).

`--singles N` adds N waiting single pods of a class that queues (1-GPU scavenger pods,
gated by the webhook), each a gang of one to the round.

`--topology preferred` makes the waiting gangs prefer an NVLink domain instead of
needing one: each plan then prices victims anywhere and in each domain, and frees one
domain within the policy's premium (`preemption.preferredDomainPremium`).

`--predictions` also times the forecast after each round (`bench.preemption.forecasting`:
in the process, and forked off the event loop as the controller makes it), with every
pod stating a run time (running ones end within the next 1-6 hours, waiting gangs run
1-4 hours), so the forecast plays many ends forward.

`--reclaim` plans the victims (2.) for gangs whose queue reclaims: the waiting gangs'
namespace gets a queue with half the cluster's GPUs as its nominal, which the running
pods' queue (nominal 0) has borrowed whole.

Times are the process's CPU time, not wall time: on a shared machine the wall clock
measures the neighbours as much as the code. A plan (2.) is timed with the cyclic
collector off, as every plan runs inside a round (`deciding.decided`): a collection that
fell in one measured the heap, not the plan.

    .venv/bin/python -m bench.preemption [--nodes 5000] [--gangs 200] [--rounds 20]
        [--singles 0] [--first-plans 50] [--churn 100] [--reclaim]
        [--topology required|preferred] [--predictions]

With --sandbox, instead, on `airlock sandbox up` (KWOK ending deleted pods as a kubelet
would): scavenger Jobs hold every GPU, then training gangs that must preempt are created
one after another, under a policy the benchmark adds (preemption at once, no minimum
run time) and victims with a 0 s grace period. For each gang, from its last member
created: the preemption recorded, the victims gone, the gates lifted, all bound, all
Running; p50/p99 over the gangs (goal: Running p99 <= 3 s).

    .venv/bin/python -m bench.preemption --sandbox [--sandbox-nodes 32] [--gangs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import gc
import json
import random
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench.common import (
    PodClock,
    create,
    job,
    load,
    pct,
    pod_template,
    policies_with,
    sandbox,
)
from bench.controller.measuring import GPU, gang_pods, ready_nodes
from bench.preemption import forecasting
from tests.builders import (
    SCAVENGER,
    TRAINING,
    gang_pod,
    iso,
    policy_yaml,
    preemptor,
    queued,
)
from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.keys import GANG_LABEL, PREEMPTION_ANNOTATION
from webhook.policy.model import DEFAULT_ACCELERATORS
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig

NOW = time.time()


def _pod(name: str, node: str, gpus: int, started: float, gang: str | None = None
         ) -> PodInfo:
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "scavenge",
                     "labels": {GANG_LABEL: gang} if gang else {}},
        "spec": {"nodeName": node, "priority": SCAVENGER if gpus else 0,
                 "containers": [{"resources": {"requests": {
                     **({GPU: str(gpus)} if gpus else {}), "cpu": "1"}}}]},
        "status": {"phase": "Running", "startTime": iso(started)}}
    return PodInfo.parse(raw)


def full_cluster(node_count: int, rng: random.Random) -> tuple[list[NodeInfo], list[PodInfo]]:
    """Every GPU held: half the domains by single 1-GPU pods, half by 8-node gangs; CPU
    pods bring every node to 10 pods."""
    nodes = ready_nodes(node_count)
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


def waiting(count: int, rng: random.Random, mode: str = "required") -> list[PodInfo]:
    pods = []
    for g in range(count):
        for raw in gang_pods(f"train{g}", rng.choice((2, 4, 8, 16)), 8, ns="train",
                             mode=mode):
            raw["spec"]["priority"] = TRAINING
            pods.append(PodInfo.parse(raw))
    return pods


def _runs(pod: PodInfo, seconds: float) -> PodInfo:
    return dataclasses.replace(pod, marks=dataclasses.replace(pod.marks, runtime=seconds))


def _stated(pods: list[PodInfo], rng: random.Random) -> list[PodInfo]:
    """Each gang's pods stating one run time of 1-4 hours."""
    by_gang: dict[str | None, float] = {}
    return [_runs(p, by_gang.setdefault(p.marks.gang, rng.uniform(1, 4) * 3600))
            for p in pods]


def singles(count: int) -> list[PodInfo]:
    return [queued(f"scav{i}", 1, ns="scavenge", preemptionPolicy="Never")
            for i in range(count)]
# --- on the sandbox ----------------------------------------------------------------------

# Preemption as soon as a gang is complete, of pods however young: the benchmark times
# the path, not the policy's patience.
AT_ONCE = policy_yaml("bench-preempt-at-once",
                      {"preemption": {"delay": "0", "minRuntime": "0"}})
# From the last member created: the preemption recorded on the gang, every victim marked
# for deletion (the controller's writes), the gates lifted (its next round), every victim
# gone (KWOK, as a kubelet, ends them), every member bound (kube-scheduler), Running (KWOK).
STEPS = ("recorded", "victims deleting", "gates lifted", "victims gone", "bound", "Running")


def scavengers(nodes: int) -> list[dict[str, Any]]:
    """Batch sweeps holding every GPU: half of them in 1-GPU pods, half in 8-GPU pods;
    their pods end at once when deleted (a 0 s grace period)."""
    return [job("sweep-small", "scavenge", nodes * 4, pod_template(
                "sweep-small", image="ghcr.io/acme/sweep:1.0", gpus=1, grace=0)),
            job("sweep-whole", "scavenge", nodes // 2, pod_template(
                "sweep-whole", image="ghcr.io/acme/sweep:1.0", gpus=8, grace=0))]


def _free_nodes(pods: PodClock, nodes: int) -> int:
    """Nodes on which no scavenger pod holds a GPU."""
    return nodes - len({m.obj["spec"]["nodeName"] for m in pods.alive("scavenge")
                        if m.obj["spec"].get("nodeName") and m.gpus()})


def _settled(pods: PodClock, nodes: int, size: int) -> bool:
    """Nothing on its way (every scavenger pod gated or Running), no event for a second,
    no training pod left, and fewer than `size` whole nodes free: a gang of `size` must
    preempt."""
    quiet = time.monotonic() - pods.last_change >= 1.0
    moving = any(m.ungated is not None and m.running is None
                 for m in pods.alive("scavenge"))
    return (quiet and not moving and not pods.alive("train")
            and _free_nodes(pods, nodes) < size)


async def _preempting(api: client.ApiClient, nodes: int, gangs: int, size: int
                      ) -> dict[str, list[float]]:
    for ns in ("scavenge", "train"):
        await wiring.create_namespace(api, ns)
    core = client.CoreV1Api(api)
    steps: dict[str, list[float]] = {s: [] for s in STEPS}
    victim_counts = []
    # One watch over every pod: its events come in the apiserver's order, so a victim's
    # deletion and the preemptor's binding are timed on the same clock.
    async with PodClock(api).running() as pods:
        for obj in scavengers(nodes):
            await create(api, obj)
        for g in range(gangs):
            await pods.until(lambda: _settled(pods, nodes, size), 300,
                             "scavengers holding the GPUs")
            name = f"train-{g}"
            await asyncio.gather(*(core.create_namespaced_pod("train", body=gang_pod(
                name, i, size)) for i in range(size)))
            last = time.monotonic()
            times = await pods.gang_running("train", name, size, 120)
            anchor = next((t for t in times if PREEMPTION_ANNOTATION in t.annotated), None)
            if anchor is None:
                raise RuntimeError(f"gang {name} ran without preempting: the scavengers "
                                   "did not hold enough GPUs")
            record = json.loads(anchor.obj["metadata"]["annotations"][PREEMPTION_ANNOTATION])
            gone = [pods.pods[v] for v in record["victims"]]
            victim_counts.append(len(gone))
            moments = (anchor.annotated[PREEMPTION_ANNOTATION],
                       max(v.deleting or v.gone or last for v in gone),
                       max(t.ungated or last for t in times),
                       max(v.gone or last for v in gone),
                       max(t.bound or last for t in times),
                       max(t.running or last for t in times))
            for step, at in zip(STEPS, moments, strict=True):
                steps[step].append(at - last)
            await core.delete_collection_namespaced_pod("train", grace_period_seconds=0)
    print(f"  {gangs} gangs of {size} pods x 8 GPUs, each evicting "
          f"{min(victim_counts)}-{max(victim_counts)} scavenger pods "
          f"(median {statistics.median(victim_counts):g}); {load()}")
    return steps


def on_sandbox(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        policies = policies_with(Path(tmp) / "policies", "90-bench-preempt-at-once.yaml",
                                 AT_ONCE)
        with sandbox(Path(tmp) / "sandbox", args.sandbox_nodes, policies) as sbx:
            print(f"on `airlock sandbox up --nodes {args.sandbox_nodes}` (domains of 4 "
                  f"nodes of 8 GPUs), preemption at once, victims' grace period 0 s:")

            async def run() -> dict[str, list[float]]:
                async with await from_kubeconfig(sbx.kubeconfig) as api:
                    return await _preempting(api, args.sandbox_nodes, args.gangs,
                                             args.gang_size)

            steps = asyncio.run(run())
    for step, values in steps.items():
        print(f"  last member created -> {step}: p50 {statistics.median(values):.2f} s, "
              f"p99 {pct(values, 0.99):.2f} s, max {max(values):.2f} s")


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--gangs", type=int, default=None,
                        help="waiting gangs (default 200); with --sandbox, gangs timed "
                             "(default 20)")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--first-plans", type=int, default=50,
                        help="gangs planned each as the first of a round")
    parser.add_argument("--singles", type=int, default=0)
    parser.add_argument("--reclaim", action="store_true",
                        help="plan for gangs whose queue reclaims borrowed GPUs")
    parser.add_argument("--churn", type=int, default=100,
                        help="running pods that end and start again before each round and "
                             "each first plan")
    parser.add_argument("--topology", choices=("required", "preferred"), default="required",
                        help="the waiting gangs' NVLink domain: a must, or a wish (then each "
                             "plan also prices freeing one domain against spreading)")
    parser.add_argument("--predictions", action="store_true",
                        help="also time the forecast of every waiting gang's start")
    parser.add_argument("--sandbox", action="store_true",
                        help="instead: on the sandbox, time gangs that preempt to Running")
    parser.add_argument("--sandbox-nodes", type=int, default=32)
    parser.add_argument("--gang-size", type=int, default=4,
                        help="with --sandbox: pods of 8 GPUs per gang (a domain holds 4)")
    return parser.parse_args()


def main() -> int:
    args = _arguments()
    if args.sandbox:
        args.gangs = args.gangs or 20
        on_sandbox(args)
        return 0
    args.gangs = args.gangs or 200
    rng = random.Random(5)
    nodes, running = full_cluster(args.nodes, rng)
    gangs = waiting(args.gangs, rng, args.topology)
    if args.predictions:
        running = [_runs(p, (NOW - p.started) + rng.uniform(1, 6) * 3600) for p in running]
        gangs = _stated(gangs, rng)
    pods = running + gangs + singles(args.singles)
    started = time.process_time()
    cluster = Tracked.of(nodes, pods, Accelerators.of(DEFAULT_ACCELERATORS))
    print(f"tracking {len(nodes):,} nodes and {len(pods):,} pods once: "
          f"{(time.process_time() - started) * 1000:.0f} ms CPU")
    # As the controller does once it has listed the cluster (`running.py`).
    gc.collect()
    gc.freeze()
    state = QueueState(preemption=PreemptionSettings(delay=0))
    # The first round also fills what the tracked cluster keeps between rounds (which
    # nodes each kind of pod may use, its domains, their room and what evicting there
    # costs): printed apart. Before every later round (and every first plan below),
    # `--churn` running pods end and start again, so what is kept for their nodes is
    # built again, as in a busy cluster.
    gpu_pods = [p for p in running if cluster.occupancy.gpus_of.get(p.key)]

    def churn() -> None:
        for p in rng.sample(gpu_pods, args.churn):
            cluster.drop_pod(p.key)
            cluster.put_pod(p)

    _rounds(cluster, state, args, churn, len(nodes), len(running))
    if args.predictions:
        forecasting.in_process(cluster, state, NOW, args.rounds, churn)
        forecasting.forked(cluster, state, NOW, args.rounds, churn)
    _plans(cluster, gangs, args, churn, len(nodes))
    return 0


def _rounds(cluster: Tracked, state: QueueState, args: argparse.Namespace,
            churn: Callable[[], None], nodes: int, running: int) -> None:
    """The first round, then `--rounds` more, each after `--churn` pods changed."""
    started = time.process_time()
    decide(cluster, {}, NOW, state=state)
    first_round = (time.process_time() - started) * 1000
    times, preempted = [], 0
    for _ in range(args.rounds):
        churn()
        started = time.process_time()
        actions = decide(cluster, {}, NOW, state=state)
        times.append((time.process_time() - started) * 1000)
        preempted = sum(1 for a in actions if type(a).__name__ == "Preempt")
    print(f"{nodes:,} nodes, {running:,} running pods, {args.gangs} waiting gangs, "
          f"{args.singles} waiting single pods: the first round {first_round:.1f} ms; then one "
          f"round p50 {statistics.median(times):.1f} ms, p99 {pct(times, 0.99):.1f} ms, "
          f"max {max(times):.1f} ms ({preempted} preemptions per round, {args.rounds} "
          f"rounds, {args.churn} pods changed before each)")


def _plans(cluster: Tracked, gangs: list[PodInfo], args: argparse.Namespace,
           churn: Callable[[], None], nodes: int) -> None:
    """Each waiting gang's victims planned: the first plan of a round (for the first
    `--first-plans` gangs, after a churn) and a later one of the same round."""
    # The waiting gangs' namespace and the running pods' (see `waiting` and `_pod`).
    quotas = Quotas((QueueSpec("train", ("train",), nominal=nodes * 8 // 2),
                     QueueSpec("scavenge", ("scavenge",)))) if args.reclaim else Quotas()
    members: dict[str, list[PodInfo]] = {}
    for p in gangs:
        members.setdefault(p.marks.gang or "", []).append(p)

    # The first plan of a round builds the units and ranks the domains it looks at;
    # later plans of the same round reuse them.
    first: list[float] = []
    later: list[float] = []
    queue = quotas.queue_of("train")
    causes: Counter[str] = Counter()
    lost = 0.0  # GPU-seconds
    shared = preemptor(cluster, quotas, NOW)
    for i, gang in enumerate(members.values()):
        fresh = None
        if i < args.first_plans:
            churn()
            fresh = preemptor(cluster, quotas, NOW)
        for planner, times_ in ((fresh, first), (shared, later)):
            if planner is not None:
                # Timed as a round plans: with no cyclic collection (`deciding.decided`),
                # whose pauses are the collector's, not the plan's.
                gc.disable()
                started = time.process_time()
                choice = planner.plan(gang, queue, frozenset())
                times_.append((time.process_time() - started) * 1000)
                gc.enable()
                if choice is not None:
                    causes.update(v.cause for v in choice.victims)
                    lost += choice.lost
    whose = ", its queue reclaiming" if args.reclaim else ""
    for label, times_ in ((f"the first plan of a round{whose}, {args.churn} pods changed "
                           "since the last", first),
                          (f"a later plan of the same round{whose}", later)):
        print(f"planning the victims for one gang, {label}: "
              f"p50 {statistics.median(times_):.2f} ms, p99 {pct(times_, 0.99):.2f} ms "
              f"({len(times_)} gangs of 2-16 pods)")
    print("victims planned, by cause: " + ", ".join(f"{n:,} {cause}"
                                                     for cause, n in sorted(causes.items()))
          + f"; the work they would lose: {lost / 3600:,.0f} GPU-hours")
