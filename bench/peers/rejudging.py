"""A replay judged again from its pod journal (`pods.log`, `bench.peers.journal`): the
journal's sights fed to the recorder as the pod watch fed them, and the figures drawn
afresh. So a run recorded before a figure was defined, or defined anew, is measured as
today's runs are: the placement figures (waits, utilization, partial, draining, lost
work, and the jobs that broke a required topology, on the sandbox's uniform nodes), not
the ones read from annotations the journal does not keep (backfills, predicted starts).

    python -m bench.peers.rejudging --trace bench/traces/shaped.jsonl \\
        OUT/logs/run-1-1/airlock/pods.log ...
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import orjson

from bench.peers.manifests import ATTEMPT_LABEL, JOB_LABEL
from bench.peers.recording import Recorder
from bench.peers.topologies import Levels, node_labels
from webhook.policy.loading import load_policy
from webhook.sandbox.nodes import Shape
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import Job, parse_trace

# A pod's name: its job's, the attempt after the first (`-rN`), its index.
_NAME = re.compile(r"^(?P<job>.+?)(?:-r(?P<attempt>\d+))?-(?P<index>\d+)$")
_GATED = "Scheduling is blocked due to non-empty scheduling gates"


def sighting(entry: dict[str, Any]) -> dict[str, Any]:
    """The pod, as much of it as the recorder reads, from one journal line."""
    namespace, name = entry["pod"].split("/", 1)
    found = _NAME.match(name)
    if found is None:
        raise ValueError(f"{entry['pod']}: not a pod name the replay gives")
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "labels": {
        JOB_LABEL: found["job"], ATTEMPT_LABEL: found["attempt"] or "0"}}
    if entry.get("gone"):
        meta["deletionTimestamp"] = "gone"
    refused = entry.get("unschedulable")
    conditions = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}] \
        if refused and refused != _GATED else []
    return {"metadata": meta, "spec": {"nodeName": entry["node"]} if entry["node"] else {},
            "status": {"phase": entry["phase"], "conditions": conditions}}


def rejudge(jobs: Sequence[Job], entries: Iterable[dict[str, Any]], shape: Shape,
            levels: Levels, speed: float) -> dict[str, Any]:
    """The figures of the run the journal `entries` tell, in trace time (`t`), on the
    uniform cluster `shape` with the policy's topology `levels`."""
    capacity = shape.nodes * shape.gpus_per_node
    recorder = Recorder(jobs, shape.gpus_per_node, capacity, speed, node_labels(shape), levels)
    end = 0.0
    for entry in entries:
        end = entry["t"] / speed
        recorder.observe(end, sighting(entry))
    broken = recorder.broken_topologies()
    return {**summarize(recorder.timelines(end), capacity), "topologyBroken": len(broken),
            "topologyBrokenJobs": broken}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.peers.rejudging",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--trace", type=Path, required=True)
    parser.add_argument("--speed", type=float, default=100.0)
    parser.add_argument("--nodes", type=int, default=16,
                        help="the sandbox's uniform GPU nodes (bench.peers' --nodes)")
    parser.add_argument("--gpus-per-node", type=int, default=8)
    parser.add_argument("--policies", type=Path, default=Path("policies"),
                        help="the policy whose topology levels the trace's jobs name")
    parser.add_argument("journals", type=Path, nargs="+")
    args = parser.parse_args(argv)
    jobs = parse_trace(args.trace.read_text().splitlines(), str(args.trace))
    shape = Shape(nodes=args.nodes, gpus_per_node=args.gpus_per_node)
    levels = load_policy(args.policies).topology_levels
    for path in args.journals:
        entries = [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
        figures = rejudge(jobs, entries, shape, levels, args.speed)
        keep = ("utilization", "partialGangGpuSeconds", "drainingGpuSeconds",
                "lostGpuSeconds", "partialGangJobs", "topologyBroken", "topologyBrokenJobs")
        sys.stdout.write(orjson.dumps({"journal": str(path),
                                       **{k: figures[k] for k in keep}}).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
