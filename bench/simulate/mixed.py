"""`python -m bench.simulate --mixed`: the simulated day on a cluster as clusters are, beside
the uniform one (goal: <= 60 s CPU on one core; no gang straddles models; no pod lands on a
model it did not allow).

The cluster is the file `mixed-cluster.yaml` (1,213 nodes of 12 GPU models on nodes of 1,
2, 4 and 8 GPUs, the shape of Alibaba's GPU cluster trace of 2023), read as `airlock
simulate --cluster` reads it; the policy is policies/ and `mixed-policy.yaml` (the 12
models, and a queue per team listing all of them in its own order with a third of each).
The trace is the generator's, seeded: 10,000 jobs over a day, gangs of up to 16 pods, and
about a third of the jobs name 1 to 3 models their pods fit on, in a random order of
preference (`gpuModels`).

The checks read the run's own binds (`landings`), not the controller's plans; the bench
exits 1 when any gang straddles models or any pod is bound off its models.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.simulate.landings import Landings
from webhook.controller.core.deciding import DecideOptions
from webhook.policy.gpumodels import model_of
from webhook.policy.loading import load_policy, policy_files
from webhook.policy.model import Policy
from webhook.pools import Pool, read_pools
from webhook.simulation.clusters import Shape
from webhook.simulation.generating import Mix, generate
from webhook.simulation.runs import Run
from webhook.simulation.simulating import Simulation
from webhook.simulation.traces import Job

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CLUSTER = HERE / "mixed-cluster.yaml"
POLICY = HERE / "mixed-policy.yaml"
# The share of jobs that name models: about a third of the Alibaba trace's GPU tasks do.
NAMING = 1 / 3
# The mixed cluster has a tenth of the uniform one's GPUs, and gangs of 16 pods at most:
# this scale asks for about as large a share of its GPU-hours over the day.
RUNTIME_SCALE = 0.5
MAX_PODS = 16


def mixed_policy() -> Policy:
    return load_policy([*policy_files(ROOT / "policies"), POLICY])


def model_sizes(pools: Sequence[Pool], policy: Policy) -> dict[str, tuple[int, int]]:
    """Each model's GPUs per node (the most of its pools') and GPUs in all."""
    sizes: dict[str, tuple[int, int]] = {}
    for pool in pools:
        model = model_of(policy.gpu_models, pool.node_labels())
        if model is not None:
            per, total = sizes.get(model, (0, 0))
            sizes[model] = (max(per, pool.gpus_per_node), total + pool.gpus)
    return sizes


def name_models(jobs: Sequence[Job], sizes: dict[str, tuple[int, int]],
                seed: int, share: float = NAMING) -> list[Job]:
    """The jobs, `share` of them naming 1 to 3 models whose nodes hold their pods, most
    wanted first: gangs the controller places on one of them, and pods it does not gate,
    which admission keeps to them by required node affinity."""
    rng = random.Random(f"{seed}-models")
    chosen = set(rng.sample(range(len(jobs)), round(len(jobs) * share)))
    named = list(jobs)
    for i in sorted(chosen):
        job = jobs[i]
        fits = [m for m, (per, total) in sizes.items()
                if per >= job.gpus and total >= job.least * job.gpus]
        if fits:
            picked = tuple(rng.sample(fits, rng.randint(1, min(3, len(fits)))))
            named[i] = dataclasses.replace(job, gpu_models=picked)
    return named


@dataclass(frozen=True, slots=True)
class Measured:
    """A run, its CPU and wall seconds, the share of the cluster's GPU-hours over the
    trace's span its jobs ask for, and where its pods landed (when checked)."""

    run: Run
    cpu: float
    wall: float
    asked: float
    landings: Landings | None = None


def measure(jobs: Sequence[Job], policy: Policy, shape: Shape, options: DecideOptions,
            seconds: float, check: bool) -> Measured:
    sim = Simulation(jobs, policy, shape, "airlock", options)
    landings = None
    if check:
        landings = Landings(policy, dict(zip(sim.cluster.names, sim.cluster.labels,
                                             strict=True)))
        sim.on_bind = landings.bound
    started, cpu = time.perf_counter(), time.process_time()
    run = sim.run("airlock")
    cpu, wall = time.process_time() - cpu, time.perf_counter() - started
    asked = sum(j.need * j.runtime for j in jobs) / (shape.capacity * seconds)
    return Measured(run, cpu, wall, asked, landings)


def _rows(measured: Measured, jobs: Sequence[Job]) -> dict[str, str]:
    s, run = measured.run.summary(), measured.run
    cluster = s["cluster"]
    rows = {
        "nodes / GPUs / models": f"{cluster['nodes']:,} / {cluster['gpus']:,} / "
                                 f"{len(cluster.get('pools', [None]))}",
        "jobs (naming models)": f"{len(jobs):,} ({sum(1 for j in jobs if j.gpu_models):,})",
        "GPU-hours asked / day": f"{measured.asked:.0%}",
        "CPU time": f"{measured.cpu:.1f} s",
        "wall time": f"{measured.wall:.1f} s",
        "decide()": f"{run.stats.decide_calls:,} calls, {run.stats.decide_seconds:.1f} s",
        "completed": f"{s['completed']:,}/{s['jobs']:,}",
        "never runnable": f"{s['neverRunnable']:,}",
        "wait p50 / p99": f"{s['wait']['p50']:.0f} s / {s['wait']['p99']:.0f} s",
        "utilization": f"{s['utilization']:.1%}",
        "preemptions": f"{s['preemptions']:,}",
    }
    landings = measured.landings
    if landings is not None:
        rows["pods bound"] = f"{landings.binds:,}"
        rows["gangs straddling models"] = f"{len(landings.straddling)}"
        rows["pods off their models"] = f"{len(landings.off_models)}"
    return rows


def _table(columns: dict[str, dict[str, str]]) -> str:
    keys = list(dict.fromkeys(k for rows in columns.values() for k in rows))
    width = max(map(len, keys))
    widths = {c: max(len(c), *(len(v) for v in rows.values())) for c, rows in columns.items()}
    lines = [" " * width + "".join(f"  {c:>{widths[c]}}" for c in columns)]
    lines += [f"{k:<{width}}" + "".join(f"  {rows.get(k, ''):>{widths[c]}}"
                                        for c, rows in columns.items()) for k in keys]
    return "\n".join(lines)


def main(args: argparse.Namespace) -> int:
    seconds = args.hours * 3600
    options = DecideOptions(pin=args.pin)
    base = Mix()
    columns: dict[str, dict[str, str]] = {}
    if args.baseline:
        uniform = generate(Mix(jobs=args.jobs, seconds=seconds, seed=args.seed, max_pods=128,
                               medians={c: m * args.runtime_scale
                                        for c, m in base.medians.items()}))
        shape = Shape(args.nodes, 8, args.nodes_per_domain, scoring=args.scoring)
        measured = measure(uniform, load_policy(ROOT / "policies"), shape, options, seconds,
                           check=False)
        columns["uniform (baseline)"] = _rows(measured, uniform)
        print(f"uniform: {measured.cpu:.1f} s CPU", flush=True)
    pools, policy = read_pools(CLUSTER), mixed_policy()
    generated = generate(Mix(jobs=args.jobs, seconds=seconds, seed=args.seed,
                             max_pods=MAX_PODS,
                             medians={c: m * args.mixed_runtime_scale
                                      for c, m in base.medians.items()}))
    jobs = name_models(generated, model_sizes(pools, policy), args.seed)
    measured = measure(jobs, policy, Shape(scoring=args.scoring, pools=pools), options,
                       seconds, check=True)
    columns["mixed"] = _rows(measured, jobs)
    print(_table(columns))
    landings = measured.landings
    assert landings is not None
    for gang in landings.straddling[:5]:
        print(f"straddles models: {gang[0]}/{gang[1]} (attempt {gang[2]})")
    for pod, model, allowed in landings.off_models[:5]:
        print(f"off its models: {pod} on {model}, allowed {', '.join(map(str, allowed))}")
    return 1 if landings.straddling or landings.off_models else 0
