"""`python -m bench.soak --kills 100 --restarts apiserver,etcd,webhook --seed N [-o json]`:
the controller SIGKILLed at seeded random moments while it admits, preempts and
reclaims, and with `--restarts` the apiserver, etcd and the webhook SIGKILLed and started
again in place too, on a fresh sandbox (etcd, kube-apiserver, kube-scheduler,
kube-controller-manager, KWOK with 8 nodes of 8 GPUs in 2 NVLink domains, Airlock's
webhook and controller). Airlock's mutation fails closed here (`failurePolicy: Fail`), so
a pod created while the webhook is down is refused and created again, never stored
unmarked; a fourth queue's gang asks for room with placeholders that nothing provides.
Prints the counts: kills, restarts, preemptions, victims, decisions finished by the next
leader, and the violations of each invariant (`bench/soak/checking.py`), each with the
pod's history; exits 1 if any invariant broke or a step stalled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from bench.common import POLICIES, policies_with
from bench.soak.driving import PATCH_PAUSE, RESTARTS, Namespaces, Soak, policy
from bench.soak.findings import Findings
from webhook.policy.loading import load_policy
from webhook.sandbox import wiring
from webhook.sandbox.binaries import ensure_binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import wait_ready
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.processes import (
    RESTARTABLE,
    AirlockProcess,
    Webhook,
    start_controller,
    start_webhook,
)

NAMESPACES = Namespaces("soak-team-a", "soak-team-b", "soak-scavenger", "soak-team-c")


def _restarts(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in text.split(",") if k)
    unknown = sorted(set(kinds) - set(RESTARTS))
    if unknown:
        raise argparse.ArgumentTypeError(f"cannot restart {', '.join(unknown)}: "
                                         f"one or more of {','.join(RESTARTS)}")
    return kinds


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.soak",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--restarts", type=_restarts, default=(), metavar="PART,...",
                   help=f"also restart these, once a wave each ({','.join(RESTARTS)})")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policies", type=Path, default=POLICIES,
                   help="the policy the soak's own file is added to")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _failing_closed(hook: Webhook) -> list[dict[str, object]]:
    """The shipped configurations with mutation failing closed: while the webhook is
    down no pod is stored unmarked (docs/operations.md says what that costs)."""
    docs = wiring.webhook_configurations(hook.url, hook.certs.ca.read_bytes())
    for doc in docs:
        if doc["kind"] == "MutatingWebhookConfiguration":
            for webhook in doc["webhooks"]:
                webhook["failurePolicy"] = "Fail"
    return docs


def _restarter(plane: ControlPlane, hook: Webhook, started: list[AirlockProcess]
               ) -> Callable[[str], Awaitable[None]]:
    """Restart a part by SIGKILL, back once it serves again. The plane's processes are
    started again from this (the main) thread: their parent-death signal is its."""
    webhook = [hook.running]

    async def restart(kind: str) -> None:
        if kind == "webhook":
            webhook[0] = webhook[0].restart()
            started.append(webhook[0])
            process, log, url = webhook[0].process, webhook[0].log, webhook[0].ready
        else:
            component = plane.restart(RESTARTABLE[kind], kill=True)
            process, log, url = component.process, component.log, component.ready
        await asyncio.to_thread(wait_ready, kind, process, log, url)

    return restart


async def _soak(plane: ControlPlane, policies: Path, args: argparse.Namespace,
                started: list[AirlockProcess]) -> Findings:
    hook = start_webhook(plane.workdir, policies)
    started.append(hook.running)
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wiring.create_priority_classes(api, load_policy(policies))
        await create_nodes(api, topology(Shape(nodes=8, nodes_per_domain=4)))
        for ns in NAMESPACES.all:
            await wiring.create_namespace(api, ns)
        await wiring.apply_webhook_configurations(api, _failing_closed(hook))
        kubeconfig = await wiring.controller_kubeconfig(
            api, plane.url, plane.ca_file, plane.workdir / "controller.kubeconfig")

        def start() -> AirlockProcess:
            started.append(start_controller(plane.workdir, kubeconfig, policies,
                                            ["--patch-pause", PATCH_PAUSE]))
            return started[-1]

        return await Soak(api, NAMESPACES, start, args.kills, args.seed, _progress,
                          _restarter(plane, hook, started), args.restarts).run()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    binaries = ensure_binaries(_progress)
    began = time.monotonic()
    plane = ControlPlane(binaries).start()
    started: list[AirlockProcess] = []
    found: Findings | None = None
    try:
        policies = policies_with(plane.workdir / "policies", "90-soak.yaml",
                                 policy(NAMESPACES), args.policies)
        found = asyncio.run(_soak(plane, policies, args, started))
    finally:
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
            process.process.wait()
        if found is not None and found.clean:
            plane.remove()
        else:  # every component's log, to see why
            plane.stop()
            _progress(f"logs kept in {plane.workdir}")
    seconds = time.monotonic() - began
    load = os.getloadavg()[0]
    if args.output == "json":
        print(json.dumps({"seed": args.seed, "seconds": round(seconds), "loadAverage": load,
                          **found.counts(), "examples": {
                              kind: found_[:3] for kind, found_ in found.violations.items()
                              if found_}}))
    else:
        print(f"seed {args.seed}: {seconds:.0f} s, load average {load:.1f}\n{found.text()}",
              end="")
    return 0 if found.clean else 1
