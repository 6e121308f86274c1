"""`airlock simulate`: read the trace and the policies, run each requested simulation,
print the figures (text or JSON), and write the plots."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import orjson

from webhook.controller.core.deciding import DecideOptions
from webhook.controller.core.placement.pins import PIN_MODES
from webhook.policy.loading import PolicyError, load_policy
from webhook.pools import pools_argument
from webhook.simulation.clusters import SCORINGS, Shape
from webhook.simulation.reporting import render
from webhook.simulation.runs import SCHEDULERS, Run, Scheduler
from webhook.simulation.simulating import simulate
from webhook.simulation.traces import TraceError, check_models, read_trace


def add_simulate_arguments(parser: argparse.ArgumentParser) -> None:
    shape = Shape()
    parser.add_argument("--trace", type=Path, required=True,
                        help="JSON Lines, one job a line (see docs/simulate.md)")
    parser.add_argument("--policies", type=Path, default=None,
                        help="policy directory (default: ./policies, else the policy shipped "
                             "with Airlock)")
    parser.add_argument("--compare", type=Path, default=None, metavar="POLICIES",
                        help="a second policy directory (a proposed change): run it too and "
                             "show both side by side")
    parser.add_argument("--nodes", type=int, default=shape.nodes)
    parser.add_argument("--gpus-per-node", type=int, default=shape.gpus_per_node)
    parser.add_argument("--nodes-per-domain", type=int, default=shape.nodes_per_domain,
                        help="nodes sharing each topology domain (e.g. an NVLink clique)")
    pools = parser.add_mutually_exclusive_group()
    pools.add_argument("--cluster", type=pools_argument, default=(), metavar="SPEC|FILE",
                        help="node pools in place of the three flags above: "
                             "MODEL=NODESxGPUS[/NODES_PER_DOMAIN],... (e.g. h100=16x8/4,l4=8x1) "
                             "or a YAML/JSON file of pools (docs/simulate.md)")
    pools.add_argument("--cluster-from", type=Path, default=None, metavar="KUBECONFIG",
                        help="node pools read from a live cluster's nodes (their GPUs, "
                             "product and NVLink labels), in place of --cluster")
    parser.add_argument("--context", default=None,
                        help="the context of --cluster-from's kubeconfig to use")
    parser.add_argument("--scoring", choices=SCORINGS, default=shape.scoring,
                        help="kube-scheduler's NodeResourcesFit scoring: LeastAllocated (its "
                             "default, the emptiest node) or MostAllocated (bin-packing)")
    parser.add_argument("--scheduler", choices=(*SCHEDULERS, "both"), default="airlock",
                        help="airlock: the controller's own decisions; stock: the "
                             "kube-scheduler alone; both: side by side")
    parser.add_argument("--order", choices=("strict", "backfill"), default="backfill",
                        help="the controller's --order")
    parser.add_argument("--pin", choices=PIN_MODES, default="nodes",
                        help="the controller's --pin: each pod let go pinned to its planned "
                             "node, or only to its domain")
    parser.add_argument("--predictions", action="store_true",
                        help="record each gang's first known predicted start and report "
                             "how far its real start was (docs/predictions.md)")
    parser.add_argument("-o", "--output", choices=("text", "json"), default="text")
    parser.add_argument("--plot", type=Path, default=None, metavar="DIR",
                        help="write gpus.png, waits.png and queue.png here")


_UNIFORM = ("nodes", "gpus_per_node", "nodes_per_domain")


def _shape(args: argparse.Namespace) -> Shape:
    """The cluster the flags describe; ValueError for flags that cannot make one."""
    defaults = Shape()
    given = [f"--{flag.replace('_', '-')}" for flag in _UNIFORM
             if getattr(args, flag) != getattr(defaults, flag)]
    if args.cluster and given:
        flag = "--cluster-from" if args.cluster_from else "--cluster"
        raise ValueError(f"{flag} describes every node: drop {', '.join(given)}")
    shape = Shape(args.nodes, args.gpus_per_node, args.nodes_per_domain,
                  scoring=args.scoring, pools=args.cluster)
    shape.node_pools()
    return shape


def run_simulate(args: argparse.Namespace) -> int:
    try:
        shape = _shape(args)
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    if args.plot is not None and importlib.util.find_spec("matplotlib") is None:
        print("--plot needs matplotlib: pip install 'gpu-airlock[simulate]'", file=sys.stderr)
        return 2
    try:
        jobs = read_trace(args.trace)
    except TraceError as e:
        print(e, file=sys.stderr)
        return 1
    dirs: list[Path] = [args.policies] + ([args.compare] if args.compare else [])
    schedulers: tuple[Scheduler, ...] = SCHEDULERS if args.scheduler == "both" \
        else (args.scheduler,)
    options = DecideOptions(order=args.order, pin=args.pin)
    runs: list[Run] = []
    for directory in dirs:
        try:
            policy = load_policy(directory)
        except PolicyError as e:
            print(f"policy in {directory} is invalid:\n{e}", file=sys.stderr)
            return 1
        try:
            check_models(jobs, policy.gpu_models, str(args.trace))
        except TraceError as e:
            print(e, file=sys.stderr)
            return 1
        for scheduler in schedulers:
            label = scheduler if len(dirs) == 1 else f"{scheduler} {directory}"
            runs.append(simulate(jobs, policy, shape, scheduler, options, label,
                                 args.predictions and scheduler == "airlock"))
    summaries = [r.summary() for r in runs]
    if args.output == "json":
        body = summaries[0] if len(runs) == 1 else {"runs": {s["label"]: s for s in summaries}}
        print(orjson.dumps(body).decode())
    else:
        print(render(summaries))
    if args.plot is not None:
        from webhook.simulation.plotting import plot

        written = plot(runs, args.plot)
        print(f"plots: {', '.join(map(str, written))}", file=sys.stderr)
    return 0
