"""`python -m bench.fuzz [--reviews 100000] [--seed 1] [--connections 4]
[--generated-policies 3] [-o json]`: the real webhook (`python -m webhook serve`, real TLS,
a process of its own) fed reviews that hypothesis draws from the test strategies
(`tests/strategies.py`): pods as workloads' controllers and people write them, in every
operation and by any user, pods with parts replaced by any JSON, hostile pods (huge,
negative, non-ASCII and exponent values in every key Airlock reads, other systems'
gates, node names, any PriorityClass), reviews with odd parts, bytes that are no review,
and posts to paths it does not serve, over a few keep-alive HTTPS connections. One
server runs `--policies` (the shipped policy), each of the others a generated one (a
complete policy, examples that add to it and a generated document, checked by
`load_policy`); each gets its share of the reviews.

It times each review of a pod (from sending it to reading the answer) and reports the
honest ones' and the hostile ones' latency side by side: a hostile review may cost no
more than an honest one, within a small factor. It counts the answers by status class,
connection errors, answers that are neither a 400 saying why nor a well-formed
AdmissionReview answering the review's uid, patches that do not apply to the pod they
were computed for, re-mutations of a patched pod that patch again, and whether each
server is still alive (a crash: it exited) and ready (/readyz 200) at the end. It exits 1
on any crash, 5xx, connection error, malformed answer, patch that does not apply, second
patch or server not ready, and keeps the bodies that showed them (`--failures FILE`, and
in `-o json`). The same seed draws the same reviews.

With `--controller`, the controller instead, through the sandbox (`bench/fuzz/controller.py`).
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from bench.common import POLICIES, load
from bench.fuzz import controller
from bench.fuzz.drawing import drawn
from bench.fuzz.posting import (
    FAILING,
    HOSTILE,
    PATCHES,
    REQUESTS,
    REVIEW,
    VALIDATE,
    Post,
    Progress,
    Tally,
    answers_ready,
    posts,
    send_alone,
    send_oversized,
    sender,
)
from tests.builders import PodBuilder, pod, review
from tests.strategies import GeneratedPolicy, policies
from webhook.keys import GANG_SIZE_ANNOTATION, GPU_FRACTION_ANNOTATION
from webhook.policy.loading import load_policy
from webhook.sandbox.processes import Webhook, start_webhook
from webhook.simulation.timelines import percentile

# A generated policy is the last of a run this long (`_policies`).
POLICY_RUN = 12


def _latency(seconds: list[float]) -> dict[str, float | int | None]:
    """How many, p50, p99 and the most, in milliseconds."""
    def ms(p: float) -> float | None:
        found = percentile(seconds, p)
        return None if found is None else round(found * 1000, 2)
    return {"reviews": len(seconds), "p50": ms(50), "p99": ms(99), "max": ms(100)}


@dataclass
class Served:
    policy: str
    reviews: int
    seconds: float
    crashed: bool
    ready: bool
    tally: Tally
    log: str  # the server's last lines, when it crashed
    # Latency of reviews sent alone: the fuzz's first of each kind, and the crafted ones.
    alone: dict[str, list[float]] = field(default_factory=dict)


def _fuzz(hook: Webhook, policy: str, count: int, seed: int, connections: int,
          progress: Progress) -> Served:
    context = ssl.create_default_context(cafile=str(hook.certs.ca))
    port = int(hook.url.rsplit(":", 1)[1])
    tallies = [Tally() for _ in range(connections + 1)]
    send_oversized(port, context, tallies[-1])
    work: queue.Queue[Post | None] = queue.Queue(maxsize=64 * connections)
    threads = [threading.Thread(target=sender, args=(port, context, work, t, progress),
                                daemon=True) for t in tallies[:connections]]
    for thread in threads:
        thread.start()
    started = time.monotonic()

    def crashed() -> bool:
        return hook.running.process.poll() is not None

    # A crashed server stops the drawing at the next batch; what is drawn meanwhile
    # still goes out, and is counted as connection errors.
    drawn(posts(), count, seed, work.put, crashed)
    for _ in threads:
        work.put(None)
    for thread in threads:
        thread.join()
    seconds = time.monotonic() - started
    tally = Tally()
    for t in tallies:
        tally.add(t)
    sent = sum(n for k, n in tally.counts.items()
               if k.startswith("sent: ") and not k.startswith("sent: oversized"))
    for failure in tally.failures:
        failure["policy"] = policy
    gone = crashed()
    alone = {} if gone else {
        **{kind: send_alone(port, context, kept) for kind, kept in tally.kept.items()},
        **{name: send_alone(port, context, [post] * CRAFTED_REPEATS)
           for name, post in CRAFTED.items()}}
    return Served(policy, sent, seconds, gone, not gone and answers_ready(port, context), tally,
                  hook.running.tail() if gone else "", alone)


def _crafted(builder: PodBuilder) -> Post:
    return Post("crafted", VALIDATE, orjson.dumps(review(builder.build())), None)


# Reviews of the making, each sent alone CRAFTED_REPEATS times: values Python's
# int, Fraction or Decimal would spend minutes on, beside an honest pod, and the costliest
# body found (cost grows with size alone: 40,000 node-affinity terms, near 3 MiB).
CRAFTED = {
    "honest 1-GPU Job pod": _crafted(pod().gpus(1).owner("Job", "j")),
    "gpu-fraction 1e-200000000": _crafted(pod().gpus(1).owner("Job", "j").annotation(
        GPU_FRACTION_ANNOTATION, "1e-200000000")),
    "gang-size of 5,000 digits": _crafted(pod().gpus(1).gang("g", 1).annotation(
        GANG_SIZE_ANNOTATION, "9" * 5000)),
    "nvidia.com/gpu 1e200000000": _crafted(pod().gpus("1e200000000").owner("Job", "j")),
    "40,000 affinity terms (2.2 MB)": _crafted(pod().gpus(8).gang("g", 2).set("affinity", {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": "Exists"}]}
                                  for _ in range(40_000)]}}})),
}
CRAFTED_REPEATS = 10


def _policies(given_dir: Path, count: int, seed: int, workdir: Path) -> list[tuple[str, Path]]:
    """The given policy, then `count` generated ones, each loaded as the webhook would."""
    out = [(f"{given_dir.name} (given)", given_dir)]
    for i in range(count):
        # The last of a run of its own: hypothesis starts a run with its simplest examples
        # (an empty document on the shipped policy), and the next ones of a run are
        # variations of the one before.
        run: list[GeneratedPolicy] = []
        drawn(policies(), POLICY_RUN, seed * 100 + i, run.append)
        policy = run[-1]
        directory = policy.write(workdir / f"policy-{i}")
        load_policy(directory)  # a PolicyError here is the strategy's fault: it stops the run
        out.append((policy.describe(), directory))
    return out


def _serve(name: str, directory: Path, workdir: Path, count: int, seed: int,
           connections: int, progress: Progress) -> Served:
    workdir.mkdir()
    hook = start_webhook(workdir, directory)
    try:
        return _fuzz(hook, name, count, seed, connections, progress)
    finally:
        hook.running.process.terminate()
        try:
            hook.running.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            hook.running.process.kill()
            hook.running.process.wait()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.fuzz",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--reviews", type=int, default=100_000, help="bodies drawn, all servers")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--connections", type=int, default=4)
    p.add_argument("--policies", type=Path, default=POLICIES,
                   help="the first server's policy directory")
    p.add_argument("--generated-policies", type=int, default=3,
                   help="servers after the first, each with a generated policy")
    p.add_argument("--failures", type=Path, help="write the failing bodies kept here (JSON)")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    controller.add_arguments(p)
    return p


def _latencies(served: list[Served], total: Tally) -> dict[str, dict[str, float | int | None]]:
    """Honest and hostile reviews' latency under the fuzz's load, then alone, then each
    crafted review's, over every server."""
    alone: dict[str, list[float]] = {}
    for s in served:
        for name, seconds in s.alone.items():
            alone.setdefault(name, []).extend(seconds)
    return {"normal, under load": _latency(total.seconds[REVIEW]),
            "hostile, under load": _latency(total.seconds[HOSTILE]),
            **{f"{'normal' if name == REVIEW else 'hostile' if name == HOSTILE else name}, "
               f"alone": _latency(seconds) for name, seconds in alone.items()}}


def _text(served: list[Served], total: Tally, args: argparse.Namespace, seconds: float,
          clean: bool) -> str:
    reviews = sum(s.reviews for s in served)
    sending = max(sum(s.seconds for s in served), 1e-9)
    counts = total.counts
    lines = [f"fuzz, seed {args.seed}: {reviews:,} reviews over {args.connections} "
             f"connections to {len(served)} servers in {seconds:.0f} s ({sending:.0f} s "
             f"sending): {reviews / sending:.0f} reviews/s; {load()}", "",
             f"{'policy':<58}{'reviews':>9}{'seconds':>9}  crashed  ready"]
    lines += [f"{s.policy[:57]:<58}{s.reviews:>9,}{s.seconds:>9.0f}  "
              f"{'YES' if s.crashed else 'no':<9}{'yes' if s.ready else 'NO'}" for s in served]
    lines += ["", "sent:"] + [f"  {k[6:]:<40}{n:>9,}" for k, n in sorted(counts.items())
                              if k.startswith("sent: ")]
    lines += [f"requests (re-mutations of patched pods included): {counts[REQUESTS]:,}",
              f"answers: 2xx {counts['2xx']:,}, 4xx {counts['4xx']:,}, "
              f"5xx {counts['5xx']:,}",
              f"{PATCHES}: {counts[PATCHES]:,}"]
    lines += [f"{k}: {counts[k]:,}" for k in FAILING]
    lines += ["", f"{'latency (ms)':<42}{'reviews':>9}{'p50':>9}{'p99':>9}{'max':>9}"]
    lines += [f"{name[:41]:<42}{row['reviews']:>9,}{row['p50'] or 0:>9.2f}"
              f"{row['p99'] or 0:>9.2f}{row['max'] or 0:>9.2f}"
              for name, row in _latencies(served, total).items()]
    for failure in total.failures[:3]:
        lines += ["", f"{failure['what']} ({failure['why'][:300]}), POST {failure['path']} "
                  f"under {failure['policy']}:",
                  failure.get("body", failure.get("bodyBase64", ""))[:4000]]
    lines += ["", "clean" if clean else "FAILED"]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.controller:
        return controller.run(args)
    began = time.monotonic()
    served: list[Served] = []
    with tempfile.TemporaryDirectory(prefix="airlock-fuzz-") as tmp:
        servers = _policies(args.policies, args.generated_policies, args.seed, Path(tmp))
        progress = Progress(args.reviews)
        for i, (name, directory) in enumerate(servers):
            share = args.reviews // len(servers) + (i < args.reviews % len(servers))
            print(f"server {i + 1}/{len(servers)}: {name}, {share:,} reviews",
                  file=sys.stderr, flush=True)
            served.append(_serve(name, directory, Path(tmp) / f"server-{i}", share,
                                 args.seed * 100 + i, args.connections, progress))
    seconds = time.monotonic() - began
    total = Tally()
    for s in served:
        total.add(s.tally)
    clean = (not any(total.counts[k] for k in FAILING)
             and all(s.ready and not s.crashed for s in served))
    if args.failures:
        args.failures.write_text(json.dumps(total.failures, indent=1) + "\n")
    if args.output == "json":
        print(json.dumps({
            "seed": args.seed, "reviews": sum(s.reviews for s in served),
            "seconds": round(seconds), "loadAverage": os.getloadavg()[0],
            "reviewsPerSecond": round(sum(s.reviews for s in served)
                                      / max(sum(s.seconds for s in served), 1e-9)),
            "servers": [{"policy": s.policy, "reviews": s.reviews,
                         "seconds": round(s.seconds), "crashed": s.crashed,
                         "ready": s.ready, "log": s.log} for s in served],
            "counts": dict(sorted(total.counts.items())),
            "latency": _latencies(served, total),
            "failures": total.failures,
            "clean": clean}))
    else:
        print(_text(served, total, args, seconds, clean), end="")
        for s in served:
            if s.crashed:
                print(f"\n{s.policy}: the server exited; its log ends:\n{s.log}")
    return 0 if clean else 1
