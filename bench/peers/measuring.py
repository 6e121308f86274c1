"""`python -m bench.peers --trace FILE [-o json]`: one trace on the sandbox under the
stock scheduler, coscheduling, Kueue and Airlock, one after another, each on a fresh
control plane with the same fake GPU nodes; then `airlock simulate` on the same trace,
and how far it is from the real Airlock run.

Each system's own timers (Airlock's preemption and fair-share durations, coscheduling's
Permit wait, Kueue's waitForPodsReady timeout and backoff) are divided by the speed too,
so the replay compares policies, not clocks; `timers` in the JSON says what each got.

Prints `{"systems": {"stock": {...}, "coscheduling": {...}, "kueue": {...},
"airlock": {...}}, "simulation": {...}, "timers": {...}}` with `-o json` (the keys of
`airlock simulate`; a system that could not be built or started is `{"error": "..."}`),
a table otherwise; writes the table (peers.md), the JSON (peers.json) and the plots into `--out`.

`python -m bench.peers --build kueue,coscheduling` only builds (or reuses) the peers from
their Go modules and runs no trace: the test command's build step, for
tests/e2e/test_peers.py, and a first run that says how long the builds take.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.peers.manifests import SYSTEMS, System
from bench.peers.peers import PEERS, peer_timers
from bench.peers.replaying import Options, Outcome, replay
from bench.peers.reporting import gap, markdown
from bench.peers.timers import airlock_timers
from webhook.policy.loading import PolicyError, load_policy
from webhook.sandbox.nodes import Shape
from webhook.sandbox.operating import build_operators
from webhook.sandbox.operators import Operator, OperatorError
from webhook.simulation import clusters
from webhook.simulation.runs import Run, Stats
from webhook.simulation.simulating import simulate
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import TraceError, read_trace


def _systems(spec: str) -> list[System]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    return [s for s in SYSTEMS if s in names]


def _peers(spec: str) -> list[Operator]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if unknown := [n for n in names if n not in PEERS]:
        raise argparse.ArgumentTypeError(
            f"unknown peer {', '.join(unknown)}; known: {', '.join(PEERS)}")
    return [PEERS[n] for n in names]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", type=Path, help="the trace to replay (required unless --build)")
    p.add_argument("--build", type=_peers, metavar="NAMES",
                   help="only build (or reuse) these peers from their Go modules "
                        f"(comma-separated: {', '.join(PEERS)}) and run no trace")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--systems", type=_systems, default=list(SYSTEMS),
                   help=f"comma-separated, run in this order: {','.join(SYSTEMS)} (default)")
    p.add_argument("--speed", type=float, default=100.0,
                   help="trace seconds per real second: submit times, run times and each "
                        "system's own timers are divided by it (default 100: a 5-hour "
                        "trace in 3 minutes)")
    p.add_argument("--nodes", type=int, default=16)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--nodes-per-domain", type=int, default=4)
    p.add_argument("--policies", type=Path, default=Path("policies"))
    p.add_argument("--stall", type=float, default=30.0,
                   help="real seconds with nothing moving, every job submitted and none "
                        "running, after which a run stops (what is left is stuck)")
    p.add_argument("--timeout", type=float, default=1800.0,
                   help="real seconds a system's replay may take at most")
    p.add_argument("--out", type=Path, default=Path("peers-results"),
                   help="where peers.md, peers.json and the plots go (and, under logs/, "
                        "each system's component logs)")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _summary(outcome: Outcome, sim_shape: clusters.Shape) -> dict[str, Any]:
    out: dict[str, Any] = {"ended": outcome.ended,
                           "setupSeconds": round(outcome.setup_seconds, 1)}
    out.update(summarize(outcome.timelines, sim_shape.capacity))
    return out


def _plot(outcomes: Sequence[Outcome], simulated: Run | None, shape: clusters.Shape,
          out: Path) -> list[Path]:
    from webhook.simulation.plotting import plot

    # The plots read a run's label, shape, timelines and end; the real runs are given
    # as such (scheduler: the nearest of simulate's two models, never shown).
    runs = [Run(label=o.system, scheduler="airlock" if o.system == "airlock" else "stock",
                shape=shape, timelines=o.timelines, end=o.end, stats=Stats())
            for o in outcomes]
    if simulated is not None:
        runs.append(simulated)
    return plot(runs, out)


def _build(peers: list[Operator]) -> int:
    try:
        built = build_operators(peers, _progress)
    except OperatorError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for op in built:
        print(f"operator {op.name}: built")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.build is not None:
        return _build(args.build)
    if args.trace is None:
        p.error("--trace is required (or --build NAMES)")
    try:
        jobs = read_trace(args.trace)
        policy = load_policy(args.policies)
    except (TraceError, PolicyError) as e:
        print(e, file=sys.stderr)
        return 1
    shape = Shape(nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                  nodes_per_domain=args.nodes_per_domain)
    sim_shape = clusters.Shape(args.nodes, args.gpus_per_node, args.nodes_per_domain)
    options = Options(shape=shape, speed=args.speed, policies=args.policies,
                      stall=args.stall, timeout=args.timeout, logs=args.out / "logs")
    systems: dict[str, dict[str, Any]] = {}
    outcomes: list[Outcome] = []
    for system in args.systems:
        try:
            outcome = replay(system, jobs, policy, options, _progress)
        except Exception as e:  # a peer that cannot be built or started: the rest run
            _progress(f"{system} failed: {e}\n{traceback.format_exc(limit=3)}")
            systems[system] = {"error": f"{type(e).__name__}: {e}"}
            continue
        outcomes.append(outcome)
        systems[system] = _summary(outcome, sim_shape)
        _progress(f"{system}: {outcome.ended}; {orjson.dumps(systems[system]).decode()}")
    simulated = simulate(jobs, policy, sim_shape, "airlock", label="airlock simulate")
    sim_summary = summarize(simulated.timelines, sim_shape.capacity)
    simulation: dict[str, Any] = {"airlock": sim_summary}
    real = systems.get("airlock")
    if real is not None and "error" not in real:
        simulation["gap"] = gap(real, sim_summary)
    body = {"trace": str(args.trace), "speed": args.speed,
            "cluster": {"nodes": args.nodes, "gpusPerNode": args.gpus_per_node,
                        "nodesPerDomain": args.nodes_per_domain},
            "systems": systems, "simulation": simulation,
            "timers": {"airlock": airlock_timers(policy, args.speed),
                       **peer_timers(args.speed)}}
    args.out.mkdir(parents=True, exist_ok=True)
    table = markdown(systems, sim_summary)
    (args.out / "peers.md").write_text(table)
    (args.out / "peers.json").write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    written = _plot(outcomes, simulated, sim_shape, args.out)
    _progress(f"wrote {args.out / 'peers.md'}, {args.out / 'peers.json'}, "
              f"{', '.join(p.name for p in written)}")
    if args.output == "json":
        print(orjson.dumps(body).decode())
    else:
        print(table)
        if "gap" in simulation:
            print(f"simulate - real (airlock): {simulation['gap']}")
    return 0
