"""`python -m bench.peers --trace FILE [--runs N] [-o json]`: one trace on the sandbox
under the stock scheduler, coscheduling, Kueue and Airlock, one after another, each on a
fresh control plane with the same fake GPU nodes; then `airlock simulate` on the same
trace, and how far it is from the real Airlock run.

Each system's own timers (Airlock's preemption and fair-share durations, coscheduling's
Permit wait, Kueue's waitForPodsReady timeout and backoff) are divided by the speed too,
so the replay compares policies, not clocks; `timers` in the JSON says what each got.

`--runs N` replays the trace N times per system, interleaved (run 1 of every system,
then run 2 of every system, ...) so a slow drift of the machine hits every system alike;
`--trace family:SEEDS` replays a seeded family of traces (`bench.peers.family`), every
member in every run. A system replayed more than once reports each figure's median and
spread (`bench.peers.aggregating`).

Prints `{"systems": {"stock": {...}, "coscheduling": {...}, "kueue": {...},
"airlock": {...}}, "simulation": {...}, "timers": {...}}` with `-o json` (the keys of
`airlock simulate`; a system that could not be built or started is `{"error": "..."}`;
Airlock's also has `predictions`, its predicted starts' error as `airlock simulate
--predictions` reports it, from the controller's annotation on each job's pods),
a table otherwise; writes the table (peers.md), the JSON (peers.json) and the plots into
`--out`. With more than one replay a system's object is `{"figures": {"utilization":
{"median", "min", "max", "runs"}, "wait.p99": {...}, ...}, "runs": [{...one run's keys,
"run": 1, "trace": "..."}, ...]}`, and the top level says `"runs": N` and `"traces"`.

`python -m bench.peers --build kueue,coscheduling` only builds (or reuses) the peers from
their Go modules and runs no trace: the test command's build step, for
tests/e2e/test_peers.py, and a first run that says how long the builds take.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.peers import family
from bench.peers.aggregating import Summary, median_run, medians, ran, spread, system_json
from bench.peers.family import Member
from bench.peers.manifests import SYSTEMS, System
from bench.peers.models import MODELS_FILE, models_policy
from bench.peers.peers import PEERS, peer_timers
from bench.peers.plotting import plot_spread
from bench.peers.replaying import Options, Outcome, replay
from bench.peers.reporting import gap, markdown
from bench.peers.timers import airlock_timers
from webhook.policy.loading import PolicyError, load_policy, policy_files
from webhook.policy.model import Policy
from webhook.pools import pools_argument
from webhook.sandbox.nodes import Shape
from webhook.sandbox.operating import build_operators
from webhook.sandbox.operators import Operator, OperatorError
from webhook.simulation import clusters
from webhook.simulation.forecasts import accuracy
from webhook.simulation.runs import Run, Stats
from webhook.simulation.simulating import simulate
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import check_models


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


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number of runs, 1 or more")
    return n


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.peers", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", help="the trace to replay (required unless --build): a file, "
                                   "or family:SEEDS (family:11-15: a trace per seed of the "
                                   "generator, with contended.jsonl's flags)")
    p.add_argument("--runs", type=_positive, default=1,
                   help="replays of the trace per system, interleaved across systems; "
                        "each figure is then reported as its median and spread (default 1)")
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
    p.add_argument("--pools", type=pools_argument, default=(), metavar="SPEC|FILE",
                   help="a mixed-model cluster in place of the three flags above, as "
                        "`airlock sandbox up --pools` takes it (h100=8x8/4,a100=8x8,l4=4x1, "
                        "or a file): each system gets the pools' models as its users "
                        "configure them (bench.peers.models)")
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
    out["topologyBroken"] = len(outcome.broken)
    out["topologyBrokenJobs"] = outcome.broken
    if outcome.system == "airlock":
        # From the controller's annotation, as `airlock simulate --predictions` has them.
        out["predictions"] = accuracy(outcome.timelines)
    return out


def _plot(shown: Sequence[tuple[str, Outcome]], simulated: Run | None,
          shape: clusters.Shape, out: Path) -> list[Path]:
    from webhook.simulation.plotting import plot

    # The plots read a run's label, shape, timelines and end; the real runs are given
    # as such (scheduler: the nearest of simulate's two models, never shown).
    runs = [Run(label=label, scheduler="airlock" if o.system == "airlock" else "stock",
                shape=shape, timelines=o.timelines, end=o.end, stats=Stats())
            for label, o in shown]
    if simulated is not None:
        runs.append(simulated)
    return plot(runs, out)


def _build(peers: list[Operator]) -> int:
    try:
        built = build_operators(peers, _progress)
    except OperatorError as e:
        print(e, file=sys.stderr)
        return 1
    for op in built:
        print(f"operator {op.name}: built")
    return 0


@dataclass(slots=True)
class _Replays:
    """Every replay of the comparison, in the order run: per system its summaries, and
    the outcomes of the first trace's runs (the plots show one of them)."""

    summaries: dict[str, list[Summary]] = field(default_factory=dict)
    first: dict[str, list[tuple[int, Outcome, Summary]]] = field(default_factory=dict)
    family: str | None = None  # the first trace's label, when there are several

    def shown(self) -> list[tuple[str, Outcome]]:
        """Per system, the first trace's run nearest its median utilization."""
        out = []
        for system, outcomes in self.first.items():
            picked = median_run([summary for _, _, summary in outcomes])
            if picked is not None:
                run, outcome, _ = outcomes[picked]
                many = len(self.summaries[system]) > 1
                which = ([f"run {run}"] if many else []) + ([self.family] if self.family else [])
                out.append((f"{system} ({', '.join(which)})" if which else system, outcome))
        return out


def _replay_all(args: argparse.Namespace, members: list[Member], policy: Policy,
                options: Options, sim_shape: clusters.Shape) -> _Replays:
    """Run 1 of every trace under every system, then run 2, ...: interleaved, so that a
    slow drift of the machine hits every system alike."""
    replays = _Replays({s: [] for s in args.systems},
                       family=members[0].label if len(members) > 1 else None)
    many = args.runs > 1 or len(members) > 1
    for run in range(1, args.runs + 1):
        for i, m in enumerate(members):
            for system in args.systems:
                here = options if not many else replace(
                    options, logs=args.out / "logs" / f"run-{run}-{i + 1}")
                if many:
                    _progress(f"== run {run} of {args.runs}, {m.label}: {system}")
                try:
                    outcome = replay(system, m.jobs, policy, here, _progress)
                except Exception as e:  # a peer that cannot be built or started: the rest run
                    _progress(f"{system} failed: {e}\n{traceback.format_exc(limit=3)}")
                    summary: Summary = {"error": f"{type(e).__name__}: {e}"}
                else:
                    summary = _summary(outcome, sim_shape)
                    _progress(f"{system}: {outcome.ended}; {orjson.dumps(summary).decode()}")
                    if i == 0:
                        replays.first.setdefault(system, []).append((run, outcome, summary))
                if many:
                    summary.update({"run": run, "trace": m.label})
                replays.summaries[system].append(summary)
    return replays


def _policy(args: argparse.Namespace, members: list[Member]) -> tuple[Policy, Path | None]:
    """The policy every Airlock run (and `airlock simulate`) gets; on a mixed cluster,
    with the pools' models and a queue per team of the traces written beside the results
    (`bench.peers.models`), which the replay adds to Airlock's policies and Kueue mirrors.
    ValueError where the policies given define models or queues already; TraceError for a
    job naming a model the policy does not define."""
    policy = load_policy(args.policies)
    if not args.pools:
        for m in members:
            check_models(m.jobs, policy.gpu_models, m.label)
        return policy, None
    if policy.gpu_models or policy.queues:
        raise ValueError(f"{args.policies}: --pools writes the GPU models and a queue per "
                          "team itself (bench.peers.models), so that Kueue's flavors and "
                          "queues mirror them; these policies define gpuModels or queues "
                          "already")
    teams = sorted({job.namespace for m in members for job in m.jobs})
    args.out.mkdir(parents=True, exist_ok=True)
    models_file = args.out / MODELS_FILE
    models_file.write_text(yaml.safe_dump(models_policy(args.pools, teams), sort_keys=False))
    policy = load_policy([*policy_files(args.policies), models_file])
    for m in members:
        check_models(m.jobs, policy.gpu_models, m.label)
    return policy, models_file


def main(argv: list[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.build is not None:
        return _build(args.build)
    if args.trace is None:
        p.error("--trace is required (or --build NAMES)")
    try:
        members = family.members(args.trace)
        policy, models_file = _policy(args, members)
    except (ValueError, PolicyError) as e:  # TraceError among them
        print(e, file=sys.stderr)
        return 1
    shape = Shape(nodes=args.nodes, gpus_per_node=args.gpus_per_node,
                  nodes_per_domain=args.nodes_per_domain, pools=args.pools)
    sim_shape = clusters.Shape(args.nodes, args.gpus_per_node, args.nodes_per_domain,
                               pools=args.pools)
    options = Options(shape=shape, speed=args.speed, policies=args.policies,
                      stall=args.stall, timeout=args.timeout, logs=args.out / "logs",
                      models_file=models_file)
    replays = _replay_all(args, members, policy, options, sim_shape)
    simulated = [simulate(m.jobs, policy, sim_shape, "airlock", label="airlock simulate")
                 for m in members]
    sims = [summarize(s.timelines, sim_shape.capacity) for s in simulated]
    simulation: dict[str, Any] = {"airlock": system_json(sims)}
    real = replays.summaries.get("airlock", [])
    if ran(real):
        simulation["gap"] = gap(medians(spread(real)), medians(spread(sims)))
    body: dict[str, Any] = {"trace": args.trace, "speed": args.speed}
    if args.runs > 1 or len(members) > 1:
        body.update({"runs": args.runs, "traces": [m.label for m in members]})
    body.update({
        "cluster": {"pools": [pool.model_dump(by_alias=True, mode="json")
                              for pool in args.pools]} if args.pools else {
            "nodes": args.nodes, "gpusPerNode": args.gpus_per_node,
            "nodesPerDomain": args.nodes_per_domain},
        "systems": {name: system_json(s) for name, s in replays.summaries.items()},
        "simulation": simulation,
        "timers": {"airlock": airlock_timers(policy, args.speed), **peer_timers(args.speed)}})
    args.out.mkdir(parents=True, exist_ok=True)
    table = markdown(replays.summaries, sims)
    (args.out / "peers.md").write_text(table)
    (args.out / "peers.json").write_bytes(orjson.dumps(body, option=orjson.OPT_INDENT_2))
    written = _plot(replays.shown(), simulated[0], sim_shape, args.out)
    written.append(plot_spread({**replays.summaries, "airlock simulate": sims}, args.out))
    _progress(f"wrote {args.out / 'peers.md'}, {args.out / 'peers.json'}, "
              f"{', '.join(p.name for p in written)}")
    if args.output == "json":
        print(orjson.dumps(body).decode())
    else:
        print(table)
        if "gap" in simulation:
            print(f"simulate - real (airlock, medians): {simulation['gap']}")
    return 0
