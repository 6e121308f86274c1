"""`python -m bench.soak --kills 20 --seed N [-o json]`: the controller SIGKILLed at seeded
random moments while it preempts and reclaims, on a fresh sandbox (etcd, kube-apiserver,
kube-scheduler, kube-controller-manager, KWOK with 8 nodes of 8 GPUs in 2 NVLink
domains, Airlock's webhook and controller). Prints the counts: kills, preemptions,
victims, decisions finished by the next leader, and the violations of each invariant
(`bench/soak/checking.py`); exits 1 if any invariant broke or a step stalled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from pathlib import Path

from bench.common import POLICIES, policies_with
from bench.soak.checking import Findings
from bench.soak.driving import PATCH_PAUSE, Namespaces, Soak, policy
from webhook.policy.loading import load_policy
from webhook.sandbox import wiring
from webhook.sandbox.binaries import ensure_binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.processes import AirlockProcess, start_controller, start_webhook

NAMESPACES = Namespaces("soak-team-a", "soak-team-b", "soak-scavenger")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench.soak",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--policies", type=Path, default=POLICIES,
                   help="the policy the soak's own file is added to")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    return p


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _soak(plane: ControlPlane, policies: Path, args: argparse.Namespace,
                started: list[AirlockProcess]) -> Findings:
    hook = start_webhook(plane.workdir, policies)
    started.append(hook.running)
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wiring.create_priority_classes(api, load_policy(policies))
        await create_nodes(api, topology(Shape(nodes=8, nodes_per_domain=4)))
        for ns in NAMESPACES.all:
            await wiring.create_namespace(api, ns)
        await wiring.apply_webhook_configurations(api, wiring.webhook_configurations(
            hook.url, hook.certs.ca.read_bytes()))
        kubeconfig = await wiring.controller_kubeconfig(
            api, plane.url, plane.ca_file, plane.workdir / "controller.kubeconfig")

        def start() -> AirlockProcess:
            started.append(start_controller(plane.workdir, kubeconfig, policies,
                                            ["--patch-pause", PATCH_PAUSE]))
            return started[-1]

        return await Soak(api, NAMESPACES, start, args.kills, args.seed, _progress).run()


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    binaries = ensure_binaries(_progress)
    began = time.monotonic()
    plane = ControlPlane(binaries).start()
    started: list[AirlockProcess] = []
    try:
        policies = policies_with(plane.workdir / "policies", "90-soak.yaml",
                                 policy(NAMESPACES), args.policies)
        found = asyncio.run(_soak(plane, policies, args, started))
    finally:
        for process in started:
            if process.process.poll() is None:
                process.process.kill()
            process.process.wait()
        plane.remove()
    seconds = time.monotonic() - began
    load = os.getloadavg()[0]
    if args.output == "json":
        print(json.dumps({"seed": args.seed, "seconds": round(seconds), "loadAverage": load,
                          **found.counts()}))
    else:
        print(f"seed {args.seed}: {seconds:.0f} s, load average {load:.1f}\n{found.text()}",
              end="")
    return 0 if found.clean else 1
