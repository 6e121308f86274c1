"""Helpers for tests against a real apiserver: create what users create, read back what
the cluster made of it, wait for a condition without a fixed sleep; the controller
processes a test starts, and the types of what the e2e fixtures hand a test. Test
modules import these from here, never from a conftest."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from tests.builders import gang_pod
from webhook.keys import GATE
from webhook.sandbox.processes import AirlockProcess, start_controller

# The end-to-end cluster's nodes (tests/e2e/conftest.py): 8 GPUs each.
GPUS_PER_NODE = 8
ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "policies"

# What the e2e fixtures hand a test: make a namespace, add a policy file (name, text),
# add nodes (manifests).
NamespaceFactory = Callable[..., Awaitable[str]]
PolicyFileFactory = Callable[[str, str], Path]
NodeFactory = Callable[[list[dict[str, Any]]], Awaitable[None]]


def alive(pid: int) -> bool:
    """Running, and not a zombie nobody reaped (a container's PID 1 may not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


class Controllers:
    """Controller processes for one test, all stopped (SIGKILL if need be) after it."""

    def __init__(self, workdir: Path, kubeconfig: Path, policies: Path) -> None:
        self.workdir, self.kubeconfig, self.policies = workdir, kubeconfig, policies
        self.running: list[AirlockProcess] = []

    def start(self, *extra: str, identity: str | None = None) -> AirlockProcess:
        proc = start_controller(self.workdir, self.kubeconfig, self.policies, list(extra),
                                identity=identity)
        self.running.append(proc)
        return proc

    def stop_all(self) -> None:
        for proc in self.running:
            if proc.process.poll() is None:
                proc.process.kill()
            proc.process.wait()


async def create_gang(api: client.ApiClient, ns: str, gang: str, size: int, count: int | None
                      = None, **kw: Any) -> None:
    core = client.CoreV1Api(api)
    await asyncio.gather(*(core.create_namespaced_pod(ns, body=gang_pod(gang, i, size, **kw))
                           for i in range(size if count is None else count)))


async def pods_of(api: client.ApiClient, ns: str, prefix: str = "") -> list[dict[str, Any]]:
    response = await client.CoreV1Api(api).list_namespaced_pod(ns, _preload_content=False)
    items: list[dict[str, Any]] = (await response.json())["items"]
    return [p for p in items if p["metadata"]["name"].startswith(prefix)]


async def all_bound(api: client.ApiClient, ns: str, prefix: str, count: int) -> bool:
    """Whether exactly `count` pods named from `prefix` exist, each bound to a node."""
    pods = await pods_of(api, ns, prefix)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


def gated(p: Mapping[str, Any]) -> bool:
    return any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])


async def until(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within}s")
        await asyncio.sleep(0.2)


async def nodes_by_name(api: client.ApiClient) -> dict[str, dict[str, str]]:
    response = await client.CoreV1Api(api).list_node(_preload_content=False)
    return {n["metadata"]["name"]: n["metadata"]["labels"]
            for n in (await response.json())["items"]}


async def events(api: client.ApiClient, ns: str, prefix: str = "") -> list[str]:
    response = await client.CoreV1Api(api).list_namespaced_event(ns, _preload_content=False)
    return [e["message"] for e in (await response.json())["items"]
            if e["involvedObject"]["name"].startswith(prefix)]


async def dry_run(api: client.ApiClient, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the apiserver would store for `body` (admission webhooks included), without
    storing it; a Status when it is denied."""
    response = await client.CoreV1Api(api).create_namespaced_pod(
        ns, body=body, dry_run="All", _preload_content=False)
    answer: dict[str, Any] = await response.json()
    return answer
