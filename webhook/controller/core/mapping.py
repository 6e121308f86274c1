"""The cluster map the dashboard draws: nodes grouped by the policy's topology levels
(block, then NVLink domain: the level with the fewest domains first), each GPU free or
held by a pod of a class and a gang, the domain kept for the head of the queue marked;
and the units running, with their domain and expected end. Pure: the tracked cluster,
the levels, the head's reservation, the queue of a namespace and the clock come in."""

from __future__ import annotations

import dataclasses
import datetime
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.gangs import membership
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.keys import CLASS_LABEL

# The host level groups nothing: each node is its own domain there.
HOST_LABEL = "kubernetes.io/hostname"


@dataclass(frozen=True, slots=True)
class Gpu:
    """One GPU of a node: free (no pod), or a share of what `pod` holds. A pod holding a
    fraction of a GPU still shows as one whole cell."""

    pod: str | None = None
    # `ns/name` of its gang, or `pod ns/name` for a pod in none.
    unit: str | None = None
    # The class Airlock gave the pod (training, inference, scavenger); None for a pod
    # that is not Airlock's.
    cls: str | None = None


@dataclass(frozen=True, slots=True)
class NodeCell:
    name: str
    gpus: float
    free: float
    ready: bool
    cordoned: bool
    # In the domain kept for the head of the queue.
    reserved: bool
    cells: tuple[Gpu, ...]


@dataclass(frozen=True, slots=True)
class Group:
    """The nodes that share a domain at every grouping level: (level, value) pairs,
    widest first; a node without a level's label has "" there."""

    domains: tuple[tuple[str, str], ...]
    gpus: float
    free: float
    nodes: tuple[NodeCell, ...]


@dataclass(frozen=True, slots=True)
class RunningLine:
    """A unit whose pods hold GPUs: where (its domain at its topology level, else at the
    narrowest grouping level) and until when its stated run time says it ends (None:
    it states none)."""

    gang: str
    queue: str
    cls: str
    pods: int
    gpus: float
    domain: str
    started: str | None
    until: str | None


@dataclass(frozen=True, slots=True)
class ClusterMap:
    levels: tuple[str, ...]
    groups: tuple[Group, ...]
    running: tuple[RunningLine, ...]
    # The head of the queue and the domain kept for it, as the leader's last round left
    # them.
    head: str | None = None
    reserved: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"levels": list(self.levels),
                "groups": [dataclasses.asdict(g) for g in self.groups],
                "running": [dataclasses.asdict(r) for r in self.running],
                "head": self.head, "reserved": self.reserved}


def unit_name(unit: UnitId) -> str:
    """`ns/name` for a gang; a single pod says it is one (as `airlock status` does)."""
    return str(unit) if unit.kind == "pod" else unit.path


def timestamp(at: float) -> str:
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def grouping(levels: Mapping[str, str], labels: Iterable[Mapping[str, str]]
             ) -> tuple[tuple[str, str], ...]:
    """The (level, node label) pairs nodes are grouped by: every level some node has but
    the host, the one with the fewest domains first (a block holds NVLink domains), ties
    by name."""
    seen = list(labels)
    domains = {name: {node[label] for node in seen if label in node}
               for name, label in levels.items() if label != HOST_LABEL}
    return tuple(sorted(((name, levels[name]) for name, found in domains.items() if found),
                        key=lambda nl: (len(domains[nl[0]]), nl[0])))


def _held(pod: PodInfo) -> tuple[str | None, str | None]:
    gang = pod.gang_id
    if gang is not None:
        return UnitId.of_gang(gang).path, pod.labels.get(CLASS_LABEL)
    if pod.marks.single:
        return f"pod {pod.key.namespace}/{pod.key.name}", pod.labels.get(CLASS_LABEL)
    return None, pod.labels.get(CLASS_LABEL)


def _cells(cluster: Tracked, node: str, total: GpuEquivalents) -> tuple[Gpu, ...]:
    """Holders first, by unit then pod, one cell per whole GPU (a fraction rounds up),
    then the free ones, as many as the node has GPUs."""
    width = math.ceil(total - 1e-9)
    cells: list[Gpu] = []
    holders = sorted(cluster.occupancy.on_node.get(node, ()),
                     key=lambda k: (_held(cluster.pods[k])[0] or "~", k))
    for key in holders:
        gpus = cluster.occupancy.gpus_of.get(key, 0)
        if not gpus:
            continue
        unit, cls = _held(cluster.pods[key])
        cells += [Gpu(f"{key.namespace}/{key.name}", unit, cls)] * math.ceil(gpus - 1e-9)
    cells = cells[:width]
    return (*cells, *[Gpu()] * (width - len(cells)))


def _reserved_nodes(cluster: Tracked, reservation: tuple[UnitId, str] | None) -> set[str]:
    """The nodes of the domain kept for the head, at the head's topology level."""
    if reservation is None:
        return set()
    head, domain = reservation
    key = next((p.marks.topology_key for p in cluster.pods.values()
                if p.marks.topology_key and membership(p) == head), None)
    if key is None:
        return set()
    return {n for n, info in cluster.capacity.nodes.items() if info.labels.get(key) == domain}


def cluster_map(cluster: Tracked, levels: Mapping[str, str],
                reservation: tuple[UnitId, str] | None, queue_of: Callable[[str], str]
                ) -> ClusterMap:
    nodes = cluster.capacity.nodes
    by = grouping(levels, (n.labels for n in nodes.values()))
    reserved = _reserved_nodes(cluster, reservation)
    grouped: dict[tuple[tuple[str, str], ...], list[NodeCell]] = {}
    for name, info in sorted(nodes.items()):
        total = cluster.capacity.gpus(info.allocatable)
        if not total:
            continue  # no GPUs: nothing to draw
        cell = NodeCell(name, float(total), float(max(cluster.capacity.free_gpu.get(name, 0), 0)),
                        info.ready, info.unschedulable, name in reserved,
                        _cells(cluster, name, total))
        path = tuple((level, info.labels.get(label, "")) for level, label in by)
        grouped.setdefault(path, []).append(cell)
    groups = tuple(Group(path, sum(n.gpus for n in cells), sum(n.free for n in cells),
                         tuple(cells)) for path, cells in sorted(grouped.items()))
    return ClusterMap(tuple(level for level, _ in by), groups,
                      _running(cluster, levels, by, queue_of),
                      unit_name(reservation[0]) if reservation else None,
                      reservation[1] if reservation else None)


def _running(cluster: Tracked, levels: Mapping[str, str], by: tuple[tuple[str, str], ...],
             queue_of: Callable[[str], str]) -> tuple[RunningLine, ...]:
    units: dict[str, list[PodInfo]] = {}
    for key in cluster.occupancy.gpus_of:
        pod = cluster.pods[key]
        unit, _ = _held(pod)
        if unit is not None:
            units.setdefault(unit, []).append(pod)
    named = {label: level for level, label in levels.items()}
    lines = []
    for unit, pods in sorted(units.items()):
        topology = next((p.marks.topology_key for p in pods if p.marks.topology_key), None)
        level, label = (named.get(topology, topology), topology) if topology else \
            (by[-1] if by else ("", ""))
        node_labels = [cluster.capacity.nodes[p.node_name].labels for p in pods
                       if p.node_name in cluster.capacity.nodes]
        values = sorted({labels.get(label, "") for labels in node_labels} - {""}) \
            if label else []
        started = [p.started for p in pods if p.started]
        runtime = next((p.marks.runtime for p in pods if p.marks.runtime), None)
        begun = min(started) if started else None
        end = begun + runtime if begun is not None and runtime is not None else None
        backfilled = [cluster.backfilled[p.key] for p in pods if p.key in cluster.backfilled]
        if backfilled:
            end = min(backfilled) if end is None else min(end, *backfilled)
        lines.append(RunningLine(
            unit, queue_of(pods[0].key.namespace), pods[0].labels.get(CLASS_LABEL) or "",
            len(pods), float(sum(cluster.occupancy.gpus_of[p.key] for p in pods)),
            f"{level} {', '.join(values)}" if values else "",
            timestamp(begun) if begun is not None else None,
            timestamp(end) if end is not None else None))
    return tuple(lines)
