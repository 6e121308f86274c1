"""Fake GPU nodes: Node objects with GPU capacity, topology labels and the GPU taint, and
no kubelet. KWOK manages every node carrying its annotation (conditions, heartbeats,
leases, the pods bound to it); kube-controller-manager's node lifecycle controller lifts
the not-ready taint once KWOK reports the node Ready."""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from dataclasses import dataclass
from typing import Any

import orjson
from kubernetes_asyncio import client

from webhook.kuberaw import json_of
from webhook.operators.kubernetes.keys import NOT_READY_TAINT
from webhook.pools import BLOCK_LABEL as BLOCK_LABEL
from webhook.pools import CLIQUE_LABEL as CLIQUE_LABEL
from webhook.pools import COUNT_LABEL, PRODUCT_LABEL, Pool, layout, validated
from webhook.pools import HOST_LABEL as HOST_LABEL
from webhook.sandbox import devices

GPU = "nvidia.com/gpu"
# The uniform cluster's one pool, and so its nodes' names (gpu-0000, ...) and NodePool's.
POOL = "gpu"
# The annotation KWOK's docs use for the nodes it fakes; the sandbox runs KWOK with
# --manage-nodes-with-annotation-selector on it, so nodes of a real kubelet stay alone.
KWOK_NODE = ("kwok.x-k8s.io/node", "fake")


@dataclass(frozen=True, slots=True)
class Shape:
    """blocks x domains (NVLink cliques) per block x nodes per domain, GPUs per node; or
    `pools` of nodes of other models and sizes, in place of those."""

    nodes: int = 8
    gpus_per_node: int = 8
    nodes_per_domain: int = 4
    domains_per_block: int = 2
    product: str = "NVIDIA-H100-80GB-HBM3"
    taint_gpus: bool = True
    # MIG nodes besides: each advertises these (profile, count) slices (mixed strategy).
    mig: tuple[tuple[str, int], ...] = ()
    mig_nodes: int = 2
    # The GPUs only as DRA devices (webhook.sandbox.devices), not as nvidia.com/gpu.
    dra: bool = False
    pools: tuple[Pool, ...] = ()

    def node_pools(self, name: str = POOL) -> tuple[Pool, ...]:
        """The pools, or the one the uniform fields describe, `name`d; PoolError for
        fields no pool may have."""
        return self.pools or validated({"pools": [{
            "name": name, "product": self.product, "count": self.nodes,
            "gpusPerNode": self.gpus_per_node, "nodesPerDomain": self.nodes_per_domain,
            "domainsPerBlock": self.domains_per_block}]}, UNIFORM_FLAGS)

    @property
    def node_count(self) -> int:
        return sum(p.count for p in self.node_pools()) + (self.mig_nodes if self.mig else 0)

    def said(self) -> str:
        """What `sandbox up` tells of the GPU nodes."""
        dra = ", as DRA devices" if self.dra else ""
        if self.pools:
            pools = "; ".join(p.said() for p in self.pools)
            return f"{sum(p.count for p in self.pools)} fake GPU nodes{dra} ({pools})"
        return f"{self.nodes} fake GPU nodes ({self.gpus_per_node} GPUs each{dra})"


# The uniform cluster's flags and defaults. Four NVLink domains by default: the demo's
# three single-node pods can take a node in at most three of them, so there is always a
# whole domain for its 4-node gang.
UNIFORM = {"nodes": 16, "gpus_per_node": 8, "nodes_per_domain": 4, "domains_per_block": 2}
# Where a bad value of theirs comes from, as a pool's error names it.
UNIFORM_FLAGS = ("the pool of --nodes (count), --gpus-per-node, --nodes-per-domain and "
                 "--domains-per-block")


def shape_of(args: argparse.Namespace) -> Shape:
    """The nodes `up` makes; ValueError for flags that contradict each other."""
    uniform = {k: getattr(args, k) for k in UNIFORM}
    if args.pools and uniform != UNIFORM:
        flags = [f"--{k.replace('_', '-')}" for k in UNIFORM if uniform[k] != UNIFORM[k]]
        raise ValueError(f"--pools describes every GPU node: drop {', '.join(flags)}")
    if args.dra and args.mig:
        raise ValueError("--dra publishes whole GPUs only; MIG nodes (--mig) advertise "
                         "their slices as extended resources, so the two do not mix")
    shape = Shape(**uniform, mig=args.mig, mig_nodes=args.mig_nodes if args.mig else 0,
                  dra=args.dra, pools=args.pools)
    shape.node_pools()
    return shape


def node_manifest(name: str, gpus: int, labels: dict[str, str], product: str,
                  taint: bool, dra: bool = False, cpu: str = "96", memory: str = "1024Gi"
                  ) -> dict[str, Any]:
    """A node as a kubelet registers it. With `dra` its GPUs are not an extended resource:
    a node whose GPUs NVIDIA's DRA driver publishes runs no device plugin."""
    resources = {"cpu": cpu, "memory": memory, "pods": "110",
                 **({} if dra else {GPU: str(gpus)})}
    return {
        "apiVersion": "v1", "kind": "Node",
        # The labels a kubelet registers a node with, the deprecated beta ones too: without
        # them kube-controller-manager adds them, a read and a write more per node.
        "metadata": {"name": name, "annotations": dict([KWOK_NODE]), "labels": {
            HOST_LABEL: name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64",
            PRODUCT_LABEL: product, COUNT_LABEL: str(gpus), **labels}},
        "spec": {"taints": [{"key": GPU, "value": "present", "effect": "NoSchedule"}]
                 if taint else []},
        # A node may be created with its status, as a kubelet registers; KWOK's
        # node-initialize stage keeps the capacity it finds and adds the conditions.
        "status": {"capacity": resources, "allocatable": resources},
    }


def topology(shape: Shape, prefix: str = POOL) -> list[dict[str, Any]]:
    """The nodes of every pool (the uniform one named `prefix`), pool after pool."""
    nodes = []
    for node in layout(shape.node_pools(prefix)):
        pool = node.pool
        labels = pool.node_labels()
        if node.domain is not None:
            labels |= {CLIQUE_LABEL: f"clique-{node.domain}", BLOCK_LABEL: f"block-{node.block}"}
        nodes.append(node_manifest(f"{pool.name}-{node.index:04d}", pool.gpus_per_node,
                                   labels, pool.product, shape.taint_gpus, shape.dra,
                                   pool.cpu, pool.memory))
    if shape.mig:
        nodes += [mig_node(f"mig-{i:04d}", shape.mig, shape.product, shape.taint_gpus)
                  for i in range(shape.mig_nodes)]
    return nodes


_PROFILE = re.compile(r"^([1-7])g\.(\d+)gb$")


def mig_profiles(text: str) -> tuple[tuple[str, int], ...]:
    """`1g.10gb=7,3g.40gb=2` as ((profile, count), ...); ValueError naming what is wrong."""
    profiles = []
    for part in text.split(","):
        profile, _, count = part.strip().partition("=")
        if not _PROFILE.match(profile) or not count.isdigit() or int(count) < 1:
            raise ValueError(f"{part.strip()!r} is not PROFILE=COUNT (e.g. 1g.10gb=7)")
        profiles.append((profile, int(count)))
    return tuple(profiles)


def mig_node(name: str, profiles: tuple[tuple[str, int], ...], product: str, taint: bool
             ) -> dict[str, Any]:
    """A node whose GPUs MIG partitions under the mixed strategy: the device plugin
    advertises each profile as nvidia.com/mig-<profile> and no whole nvidia.com/gpu, and
    GPU feature discovery labels the strategy and each profile's count."""
    # Seven compute slices make a GPU (A100, H100, B200); a profile's name starts with its
    # slices ("3g.40gb").
    gpus = -(-sum(int(p.split("g.", 1)[0]) * n for p, n in profiles) // 7)
    labels = {"nvidia.com/mig.capable": "true", "nvidia.com/mig.strategy": "mixed",
              **{f"nvidia.com/mig-{p}.count": str(n) for p, n in profiles}}
    manifest = node_manifest(name, 0, labels, product, taint)
    manifest["metadata"]["labels"]["nvidia.com/gpu.count"] = str(gpus)
    for key in ("capacity", "allocatable"):
        manifest["status"][key] = {**manifest["status"][key],
                                   **{f"nvidia.com/mig-{p}": str(n) for p, n in profiles}}
    return manifest


def ready(node: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (node.get("status") or {}).get("conditions") or [])


def schedulable(node: dict[str, Any]) -> bool:
    """Ready, and rid of the not-ready taint that TaintNodesByCondition put on at creation
    (kube-controller-manager lifts it once KWOK reports the node Ready)."""
    tainted = any(t.get("key") == NOT_READY_TAINT
                  for t in (node.get("spec") or {}).get("taints") or [])
    return ready(node) and not tainted


def lease_seconds(nodes: int) -> int:
    """A node Lease's duration for a sandbox of `nodes`: a kubelet's 40 s up to 400
    nodes, then longer, so that renewals stay at about 25 a second (at 40 s, 5,000 nodes
    would renew 500 Leases a second, more than 2 shared cores serve)."""
    return max(40, nodes // 10)


@dataclass(frozen=True, slots=True)
class NodeTimes:
    """Seconds from the start of `create_nodes`: every node created, every node Ready
    (KWOK), every node schedulable (kube-controller-manager lifted the taint)."""

    created: float
    ready: float
    schedulable: float


async def create_nodes(api: client.ApiClient, nodes: list[dict[str, Any]],
                       concurrency: int = 32, within: float | None = None,
                       dra: bool = False) -> NodeTimes:
    """Create the nodes and return once every one is schedulable (by default within
    two minutes, and a fifth of a second more per node: 5,000 took over 10 minutes on 2
    cores shared with other work). Creating 5,000 took 87 s 16 at
    a time and 76 s 32 at a time on 2 loaded cores: the apiserver, not the client,
    sets the pace. With `dra`, the DeviceClasses first, and each node's ResourceSlices
    as soon as the node exists (they name it as their owner)."""
    core = client.CoreV1Api(api)
    limit = asyncio.Semaphore(concurrency)
    started = time.monotonic()
    if dra:
        await devices.create_device_classes(api)

    async def one(node: dict[str, Any]) -> None:
        async with limit:
            # Read raw: the client's model objects cost more than the request here.
            created = await json_of(await core.create_node(body=node, _preload_content=False))
            if dra:
                await devices.create_slices(api, created)

    await asyncio.gather(*(one(n) for n in nodes))
    created = time.monotonic() - started
    names = {n["metadata"]["name"] for n in nodes}
    limit_s = within if within is not None else 120 + len(nodes) / 5
    clock = _Readiness(set(names), set(names), time.monotonic())
    try:
        await asyncio.wait_for(_schedulable(core, clock), limit_s)
    except TimeoutError:
        raise RuntimeError(
            f"{len(clock.not_schedulable)} of {len(nodes)} fake nodes not Ready (by KWOK) "
            f"and rid of the not-ready taint (by kube-controller-manager) after "
            f"{limit_s:.0f}s ({len(clock.not_ready)} not Ready)") from None
    return NodeTimes(created, clock.ready_at - started, time.monotonic() - started)


@dataclass
class _Readiness:
    """The nodes not yet Ready and not yet schedulable, and when the last one became
    Ready."""

    not_ready: set[str]
    not_schedulable: set[str]
    ready_at: float

    def see(self, node: dict[str, Any]) -> None:
        name = node["metadata"]["name"]
        if name in self.not_ready and ready(node):
            self.not_ready.discard(name)
            if not self.not_ready:
                self.ready_at = time.monotonic()
        if schedulable(node):
            self.not_schedulable.discard(name)


async def _schedulable(core: client.CoreV1Api, clock: _Readiness) -> None:
    """A list, then a watch, until every node is schedulable: polling a list of 5,000
    nodes would move megabytes a time. A watch that ends or expires (an ERROR event) is
    followed by a fresh list."""
    while True:
        listed = await (await core.list_node(_preload_content=False)).json()
        for n in listed["items"]:
            clock.see(n)
        if not clock.not_schedulable:
            return
        response = await core.list_node(
            watch=True, resource_version=listed["metadata"]["resourceVersion"],
            timeout_seconds=60, _preload_content=False)
        async with response:
            async for line in response.content:
                if not line.strip():
                    continue
                event = orjson.loads(line)
                if event["type"] == "ERROR":
                    break
                clock.see(event["object"])
                if not clock.not_schedulable:
                    return
