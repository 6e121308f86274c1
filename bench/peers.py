"""`python -m bench.peers --trace FILE [-o json]`: one trace on the sandbox under the
stock scheduler, coscheduling, Kueue and Airlock, one after another, each on a fresh
control plane with the same fake GPU nodes; then `airlock simulate` on the same trace,
and how far it is from the real Airlock run.

Prints `{"systems": {"stock": {...}, "coscheduling": {...}, "kueue": {...},
"airlock": {...}}, "simulation": {...}}` with `-o json` (the keys of `airlock simulate`;
a system that could not be built or started is `{"error": "..."}`), a table otherwise;
writes the table (peers.md), the JSON (peers.json) and the plots into `--out`.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.peering.manifests import SYSTEMS, System
from bench.peering.replaying import Options, Outcome, replay
from bench.peering.reporting import gap, markdown
from webhook.policy.loading import PolicyError, load_policy
from webhook.sandbox.nodes import Shape
from webhook.simulation import clusters
from webhook.simulation.simulating import Run, Stats, simulate
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import TraceError, read_trace


def _systems(spec: str) -> list[System]:
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown system(s) {', '.join(unknown)}; known: {', '.join(SYSTEMS)}")
    return [s for s in SYSTEMS if s in names]


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", type=Path, required=True)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--systems", type=_systems, default=list(SYSTEMS),
                   help=f"comma-separated, run in this order: {','.join(SYSTEMS)} (default)")
    p.add_argument("--speed", type=float, default=100.0,
                   help="trace seconds per real second: submit times and run times are "
                        "divided by it (default 100: a 5-hour trace in 3 minutes)")
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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
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
            "systems": systems, "simulation": simulation}
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


if __name__ == "__main__":
    sys.exit(main())
