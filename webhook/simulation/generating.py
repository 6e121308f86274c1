"""Synthetic traces: a seeded mix of classes, gang sizes, run times and arrivals, so a
simulation can be tried at any scale, and repeated exactly.

- training: gangs of 1 to `max_pods` pods (powers of two) of whole nodes' GPUs, or a
  single pod with a few GPUs; long runs;
- inference: bursts of replicas (a few pods within a minute, as when a service scales
  out), mostly single pods, some multi-pod serving groups;
- scavenger: single batch pods of 1 to 4 GPUs, arriving steadily, short runs.

Run times are log-normal around each class's median. Arrivals outside bursts are uniform
over the trace (a Poisson process, once sorted).

Shares of the training gangs can be elastic (running with half their pods, `minPods`) or
sliced (the gang in one block, slices of half of it in one NVLink domain each), and a
share of all jobs can state how long they run (`expectedRuntime`: their run time, over-
estimated by up to half, as people do).

    python -m webhook.simulation.generating --jobs 200 --seed 7 --hours 4 -o trace.jsonl
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from webhook.keys import CLASSES, ClassName
from webhook.simulation.traces import Job, dump_trace

_BURST_SECONDS = 60.0


@dataclass(frozen=True, slots=True)
class Mix:
    jobs: int = 200
    seconds: float = 4 * 3600.0
    seed: int = 1
    namespaces: tuple[str, ...] = ("team-a", "team-b", "team-c")
    # Share of jobs per class.
    shares: dict[ClassName, float] = field(default_factory=lambda: {
        "training": 0.35, "inference": 0.25, "scavenger": 0.40})
    # Median run time per class, seconds.
    medians: dict[ClassName, float] = field(default_factory=lambda: {
        "training": 1800.0, "inference": 900.0, "scavenger": 600.0})
    max_pods: int = 16
    gpus_per_node: int = 8
    burst: tuple[int, int] = (3, 8)
    # Shares: of training gangs of 2 pods or more, elastic and sliced (4 pods or more);
    # of all jobs, those that state their run time.
    elastic: float = 0.0
    sliced: float = 0.0
    stated: float = 0.0


def _runtime(rng: random.Random, median: float) -> float:
    # sigma 0.8: most runs within a factor of ~2.2 of the median, a long tail of ~10x.
    return float(max(30, min(round(median * math.exp(rng.gauss(0.0, 0.8))),
                             round(median * 10))))


def _gang_sizes(max_pods: int) -> list[int]:
    sizes, n = [], 2
    while n <= max_pods:
        sizes.append(n)
        n *= 2
    return sizes


def _training(rng: random.Random, mix: Mix) -> tuple[int, int]:
    sizes = _gang_sizes(mix.max_pods)
    if not sizes or rng.random() < 0.3:
        return 1, rng.choice([g for g in (1, 2, 4, 8) if g <= mix.gpus_per_node] or [1])
    # Smaller gangs are more common: weight 1/size^0.5.
    pods = rng.choices(sizes, weights=[1 / math.sqrt(s) for s in sizes])[0]
    return pods, mix.gpus_per_node


def _inference(rng: random.Random, mix: Mix) -> tuple[int, int]:
    if mix.max_pods >= 2 and rng.random() < 0.2:
        return 2, mix.gpus_per_node
    return 1, rng.choice([g for g in (1, 2, 4) if g <= mix.gpus_per_node] or [1])


def _scavenger(rng: random.Random, mix: Mix) -> tuple[int, int]:
    return 1, rng.choice([g for g in (1, 2, 4) if g <= mix.gpus_per_node] or [1])


_SHAPES = {"training": _training, "inference": _inference, "scavenger": _scavenger}
_PREFIX: dict[ClassName, str] = {"training": "train", "inference": "infer",
                                 "scavenger": "scav"}


def generate(mix: Mix) -> list[Job]:
    """`mix.jobs` jobs, sorted by submit; the same mix gives the same trace."""
    rng = random.Random(mix.seed)
    # Its own stream: the same seed gives the same jobs whatever the shares of shapes.
    shaping = random.Random(f"{mix.seed}-shapes")
    classes: list[ClassName] = list(mix.shares)
    drawn = rng.choices(classes, weights=[mix.shares[c] for c in classes], k=mix.jobs)
    burst_left, burst_at = 0, 0.0
    jobs: list[Job] = []
    for i, cls in enumerate(drawn):
        if cls == "inference":
            if burst_left == 0:
                burst_left, burst_at = rng.randint(*mix.burst), rng.uniform(0, mix.seconds)
            burst_left -= 1
            submit = min(burst_at + rng.uniform(0, _BURST_SECONDS), mix.seconds)
        else:
            submit = rng.uniform(0, mix.seconds)
        pods, gpus = _SHAPES[cls](rng, mix)
        job = Job(name=f"{_PREFIX[cls]}-{i:05d}", submit=float(round(submit)),
                  namespace=rng.choice(mix.namespaces), cls=cls, pods=pods, gpus=gpus,
                  runtime=_runtime(rng, mix.medians[cls]))
        jobs.append(_shaped(job, shaping, mix))
    jobs.sort(key=lambda j: (j.submit, j.name))
    return jobs


def _shaped(job: Job, rng: random.Random, mix: Mix) -> Job:
    """The job, elastic or sliced, and stating its run time, by the mix's shares."""
    elastic, sliced, stated = rng.random(), rng.random(), rng.random()
    over = rng.uniform(1.0, 1.5)
    gang = job.cls == "training" and job.pods >= 2
    if gang and sliced < mix.sliced and job.pods >= 4:
        job = dataclasses.replace(job, required_topology="block", slice_topology="nvlink",
                                  slice_size=job.pods // 2)
    elif gang and elastic < mix.elastic:
        job = dataclasses.replace(job, min_pods=job.pods // 2)
    if stated < mix.stated:
        job = dataclasses.replace(job, expected_runtime=float(math.ceil(job.runtime * over)))
    return job


def _shares(text: str) -> dict[ClassName, float]:
    shares: dict[str, float] = {"training": 0.0, "inference": 0.0, "scavenger": 0.0}
    for part in text.split(","):
        name, _, value = part.partition("=")
        if name not in shares:
            raise argparse.ArgumentTypeError(f"{name!r} is not training, inference or "
                                             f"scavenger")
        try:
            shares[name] = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{part!r}: expected class=share") from None
    if sum(shares.values()) <= 0:
        raise argparse.ArgumentTypeError("the shares add up to nothing")
    return {c: shares[c] for c in CLASSES}


def build_parser() -> argparse.ArgumentParser:
    base = Mix()
    p = argparse.ArgumentParser(prog="python -m webhook.simulation.generating",
                                description="Write a synthetic trace (JSON Lines).")
    p.add_argument("--jobs", type=int, default=base.jobs)
    p.add_argument("--hours", type=float, default=base.seconds / 3600,
                   help="arrivals spread over this many hours")
    p.add_argument("--seed", type=int, default=base.seed)
    p.add_argument("--namespaces", default=",".join(base.namespaces),
                   help="comma-separated; each job picks one at random")
    p.add_argument("--mix", type=_shares, default=None,
                   help="class shares, e.g. training=0.35,inference=0.25,scavenger=0.4")
    p.add_argument("--runtime-scale", type=float, default=1.0,
                   help="multiply every class's median run time")
    p.add_argument("--max-pods", type=int, default=base.max_pods,
                   help="the largest training gang, in pods")
    p.add_argument("--gpus-per-node", type=int, default=base.gpus_per_node,
                   help="GPUs per pod of a multi-pod gang (whole nodes)")
    p.add_argument("--elastic", type=float, default=0.0,
                   help="share of training gangs that run with half their pods")
    p.add_argument("--sliced", type=float, default=0.0,
                   help="share of training gangs of 4 pods or more in one block, in "
                        "slices of half the gang, each in one NVLink domain")
    p.add_argument("--stated", type=float, default=0.0,
                   help="share of jobs that state their run time (expectedRuntime)")
    p.add_argument("-o", "--output", type=Path, default=None, help="file (default: stdout)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    base = Mix()
    mix = Mix(jobs=args.jobs, seconds=args.hours * 3600, seed=args.seed,
              namespaces=tuple(n for n in args.namespaces.split(",") if n),
              shares=args.mix or base.shares,
              medians={c: m * args.runtime_scale for c, m in base.medians.items()},
              max_pods=args.max_pods, gpus_per_node=args.gpus_per_node,
              elastic=args.elastic, sliced=args.sliced, stated=args.stated)
    lines = dump_trace(generate(mix))
    if args.output is None:
        sys.stdout.writelines(lines)
    else:
        with args.output.open("w", encoding="utf-8") as f:
            f.writelines(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())
