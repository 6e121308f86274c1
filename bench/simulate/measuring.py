"""`airlock simulate` at scale: 10,000 jobs over a day on 5,000 nodes x 8 GPUs (goal:
<= 30 s of CPU, <= 1 GiB). Prints wall and CPU time (the simulation is one thread;
on a shared machine CPU time is the steadier figure), peak memory, and how much of it the
controller's decide() took, for each scheduler.

    .venv/bin/python -m bench.simulate [--jobs 10000] [--nodes 5000]
        [--scheduler airlock|stock|both] [--runtime-scale 4]
        [--scoring LeastAllocated|MostAllocated] [--pin nodes|domain]
    .venv/bin/python -m bench.simulate --mixed [--no-baseline] [--mixed-runtime-scale 0.5]

The trace is the generator's, seeded: training gangs up to 128 pods, run times 4x the
generator's medians, which asks for about 95% of the cluster's GPU-hours over the day.
With `--nodes 3000` the same trace overloads the cluster (about 160%), and thousands of
gangs wait at once (goal: <= 60 s of CPU). Both with no GPU-hour held by a partial gang.
`--mixed` runs the day on a cluster of 12 GPU models instead, beside the uniform day
(`mixed`).
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from bench.simulate import mixed
from webhook.controller.core.deciding import DecideOptions
from webhook.controller.core.placement.pins import PIN_MODES
from webhook.policy.loading import load_policy
from webhook.simulation.clusters import SCORINGS, Shape
from webhook.simulation.generating import Mix, generate
from webhook.simulation.runs import SCHEDULERS, Scheduler
from webhook.simulation.simulating import simulate

ROOT = Path(__file__).resolve().parents[2]


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.simulate")
    p.add_argument("--jobs", type=int, default=10_000)
    p.add_argument("--hours", type=float, default=24.0)
    p.add_argument("--nodes", type=int, default=5_000)
    p.add_argument("--nodes-per-domain", type=int, default=32)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--runtime-scale", type=float, default=4.0,
                   help="multiply the generator's median run times (4: ~95%% of the "
                        "cluster's GPU-hours asked for over the day)")
    p.add_argument("--scheduler", choices=(*SCHEDULERS, "both"), default="both")
    p.add_argument("--scoring", choices=SCORINGS, default=Shape().scoring,
                   help="kube-scheduler's NodeResourcesFit scoring in the model")
    p.add_argument("--pin", choices=PIN_MODES, default="nodes", help="the controller's --pin")
    p.add_argument("--mixed", action="store_true",
                   help="the day on bench/simulate/mixed-cluster.yaml (12 GPU models, a "
                        "third of the jobs naming models), airlock only, checked for gangs "
                        "straddling models and pods off their models (exit 1 if any)")
    p.add_argument("--no-baseline", dest="baseline", action="store_false",
                   help="with --mixed: skip the uniform day beside it")
    p.add_argument("--mixed-runtime-scale", type=float, default=mixed.RUNTIME_SCALE,
                   help="with --mixed: multiply the generator's median run times (0.5: "
                        "~45%% of the mixed cluster's GPU-hours asked for over the day)")
    args = p.parse_args()
    if args.mixed:
        return mixed.main(args)
    base = Mix()
    mix = Mix(jobs=args.jobs, seconds=args.hours * 3600, seed=args.seed, max_pods=128,
              medians={c: m * args.runtime_scale for c, m in base.medians.items()})
    started = time.perf_counter()
    jobs = generate(mix)
    print(f"trace: {len(jobs)} jobs, {sum(j.pods for j in jobs)} pods, generated in "
          f"{time.perf_counter() - started:.1f} s")
    policy = load_policy(ROOT / "policies")
    shape = Shape(args.nodes, 8, args.nodes_per_domain, scoring=args.scoring)
    options = DecideOptions(pin=args.pin)
    schedulers: tuple[Scheduler, ...] = SCHEDULERS if args.scheduler == "both" \
        else (args.scheduler,)
    for scheduler in schedulers:
        started, cpu = time.perf_counter(), time.process_time()
        run = simulate(jobs, policy, shape, scheduler, options)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        s = run.summary()
        print(f"{scheduler}: {seconds:.1f} s wall ({cpu:.1f} s CPU), {run.stats.events} "
              f"events, decide() "
              f"{run.stats.decide_calls} calls, {run.stats.decide_seconds:.1f} s; "
              f"completed {s['completed']}/{s['jobs']}, wait p50 {s['wait']['p50']} s, "
              f"p99 {s['wait']['p99']} s, utilization {s['utilization']:.1%}, "
              f"partial-gang GPU-h {s['partialGangGpuSeconds'] / 3600:.0f}, "
              f"preemptions {s['preemptions']} ({s['lostGpuSeconds'] / 3600:.0f} GPU-h lost)")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS: {peak:.0f} MiB")
    return 0
