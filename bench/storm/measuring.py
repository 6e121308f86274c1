"""A storm of GPU pods through the real apiserver, with Airlock's webhook wired in.

    .venv/bin/python -m bench.storm [--pods 2000] [--rate PODS_PER_SECOND] [--baseline]
        [--restart-webhook] [--failure-policy Ignore|Fail] [-o json]

One control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, KWOK
with 16 nodes of 8 GPUs), the webhook serving the default policies/ through the shipped
webhook configurations. Half the pods come from Deployments of 1-GPU inference replicas,
half from indexed Jobs of 8-GPU gang members, all created at once, so that the ReplicaSet
and Job controllers create pods at 100 a second or more (or, with `--rate`, the workloads
are sent spread out so their pods come at about that rate). It prints the creation rate (a
pod watch), the apiserver's own histogram
`apiserver_admission_webhook_admission_duration_seconds` for each webhook over the storm
(calls, p50, p99), the webhook's own, and the apiserver's error counters; to tell where
the time goes, each process's CPU seconds, the apiserver's goroutines' waits for a CPU
and the connections it made to the webhook (each a TLS handshake). With
`--restart-webhook` the webhook is SIGKILLed once half the pods are stored and started
again on its port; with `--failure-policy Fail` both webhook configurations fail closed.
With `--baseline` the same storm is run again on a fresh plane with a bare aiohttp
endpoint that allows every review unchanged in the webhook's place, and its latency, as
the apiserver measured it, is printed beside Airlock's: what the apiserver's side of a
call and the machine cost, which no webhook can go below.
It checks what the failure policy promises (`checking`) and exits 1 if a promise broke.

Goal: p99 at or under 10 ms with 0 errors at 100 pods/s or more (figures, not asserted).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.common import POLICIES
from bench.storm import checking, reporting, storming
from bench.storm.figures import Errors
from webhook.sandbox.binaries import Binaries, ensure_binaries
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.processes import Webhook, start_webhook


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.storm",
                                description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument("--pods", type=int, default=2000)
    p.add_argument("--replicas", type=int, default=100, help="pods per Deployment")
    p.add_argument("--gang-size", type=int, default=32,
                   help="pods per indexed Job, each Job one gang")
    p.add_argument("--nodes", type=int, default=16, help="fake nodes of 8 GPUs")
    p.add_argument("--restart-webhook", action="store_true",
                   help="SIGKILL the webhook once half the pods are stored, and start it "
                        "again on its port")
    p.add_argument("--failure-policy", choices=("Ignore", "Fail"), default="Ignore",
                   help="both webhooks' (the shipped configurations say Ignore)")
    p.add_argument("--rate", type=float, default=None, metavar="PODS_PER_SECOND",
                   help="send the workloads spread out so their pods come at about this "
                        "rate (default: all at once, as fast as the controllers make them)")
    p.add_argument("--baseline", action="store_true",
                   help="then the same storm on a fresh plane with the bare aiohttp endpoint "
                        "(bench/admission/echo_server.py) in the webhook's place")
    p.add_argument("--wait", type=float, default=300.0,
                   help="seconds to wait for the last pod to be stored")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _settings(args: argparse.Namespace) -> storming.Settings:
    return storming.Settings(args.pods, args.replicas, args.gang_size, args.nodes,
                             args.failure_policy, args.restart_webhook, args.wait, args.rate)


def _storm(binaries: Binaries, settings: storming.Settings,
           start: Callable[[Path, ControlPlane], Webhook]) -> storming.Run:
    with tempfile.TemporaryDirectory() as tmp, ControlPlane(binaries) as plane:
        hook = start(Path(tmp), plane)
        try:
            return asyncio.run(storming.run(plane, hook, settings, _progress))
        finally:
            hook.running.process.kill()
            hook.running.process.wait()


def _airlock(workdir: Path, plane: ControlPlane) -> Webhook:
    """The webhook as a cluster runs it, reading the plane's PriorityClasses (so each pod
    is mutated once: docs/admission.md, "One call per pod"), not its DRA claims (the storm
    has none)."""
    return start_webhook(workdir, POLICIES, extra=["--kubeconfig", str(plane.admin_kubeconfig),
                                                   "--priority-classes", "kubernetes"])


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    settings = _settings(args)
    binaries = ensure_binaries(_progress)
    load_before = os.getloadavg()[0]
    began = time.monotonic()
    run = _storm(binaries, settings, _airlock)
    load_after = os.getloadavg()[0]
    bare = None
    if args.baseline:
        _progress("the same storm, the bare endpoint in the webhook's place")
        bare = _storm(binaries, replace(settings, bare=True, restart=False),
                      lambda workdir, _: storming.start_bare(workdir))
    _progress(f"{time.monotonic() - began:.0f} s in all")
    errors = Errors.between(run.after, run.before)
    promises = checking.promises(run, settings, errors)
    figs = reporting.report(settings, run, promises, errors, (load_before, load_after))
    if bare is not None:
        figs["baseline"] = reporting.baseline(bare)
    if args.output == "json":
        print(json.dumps(figs))
    else:
        print(reporting.text(figs), end="")
    return 0 if all(p.held for p in promises) else 1
