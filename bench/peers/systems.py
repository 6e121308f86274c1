"""A system brought up on a fresh sandbox for a replay, and its logs kept after: the
cluster's priority classes, GPU nodes and namespaces; Airlock as the sandbox runs it;
Kueue's objects."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from bench.peers.manifests import System
from bench.peers.peers import KUEUE_NAMESPACE
from webhook.policy.model import Policy
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.processes import AirlockProcess, start_controller, start_webhook


def keep_logs(workdir: Path, into: Path) -> None:
    """Every component's log under `workdir` (and the pod journal), copied into `into`."""
    shutil.rmtree(into, ignore_errors=True)
    for log in workdir.rglob("*.log"):
        target = into / log.relative_to(workdir)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(log, target)


async def make_cluster(plane: ControlPlane, policy: Policy, namespaces: list[str],
                       shape: Shape, system: System) -> None:
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wiring.create_priority_classes(api, policy)
        await create_nodes(api, topology(shape))
        for ns in [*namespaces, *([KUEUE_NAMESPACE] if system == "kueue" else [])]:
            await wiring.create_namespace(api, ns)


def start_airlock(plane: ControlPlane, policies: Path, flags: list[str]
                  ) -> list[AirlockProcess]:
    """As the sandbox runs Airlock: the webhook wired in by URL, the controller as its own
    ServiceAccount with the RBAC deploy/ grants it, given `flags`."""
    hook = start_webhook(plane.workdir, policies)
    started = [hook.running]
    try:
        async def wire() -> Path:
            async with await from_kubeconfig(plane.admin_kubeconfig) as api:
                await wiring.apply_webhook_configurations(api, wiring.webhook_configurations(
                    hook.url, hook.certs.ca.read_bytes()))
                return await wiring.controller_kubeconfig(
                    api, plane.url, plane.ca_file, plane.workdir / "controller.kubeconfig")

        kubeconfig = asyncio.run(wire())
        started.append(start_controller(plane.workdir, kubeconfig, policies, flags))
    except BaseException:
        for process in started:
            process.process.terminate()
        raise
    return started


async def apply_objects(kubeconfig: Path, docs: list[dict[str, Any]]) -> None:
    """Kueue's objects (cluster-scoped or namespaced, by their metadata), in order: a
    flavor names its topology, a queue its cohort and flavor."""
    async with await from_kubeconfig(kubeconfig) as api:
        custom = client.CustomObjectsApi(api)
        for doc in docs:
            group, version = doc["apiVersion"].split("/")
            kind = doc["kind"].lower()
            plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"
            ns = doc["metadata"].get("namespace")
            if ns:
                await custom.create_namespaced_custom_object(group, version, ns, plural, doc)
            else:
                await custom.create_cluster_custom_object(group, version, plural, doc)
