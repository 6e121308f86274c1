"""The simulated cluster: nodes with GPUs, grouped into topology domains, what runs on
each, and the stock kube-scheduler's part: binding a pod to a node, and pod-level
priority preemption when none has room.

The scheduler model: filter the nodes with room (and, for a pod Airlock let go, in the
domain it pinned and off the nodes it reserved for others), then score them by
NodeResourcesFit as configured (`Shape.scoring`): `LeastAllocated`, kube-scheduler's
default, takes the emptiest node, spreading small pods; `MostAllocated`, the bin-packing
many GPU clusters configure, the fullest that still fits, so whole nodes stay free for
big pods. Ties go to the first node in node order (kube-scheduler picks among them at
random). Preemption follows the kube-scheduler's rules for one pod:
on one node, evict pods of lower priority, lowest first (youngest first among equals),
only as many as needed; among nodes, the one whose highest victim priority is lowest,
then the one with the least room beyond the need (kube-scheduler then prefers the fewest
victims; on GPU nodes the two mostly agree).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

from webhook.controller.core.nodes import NodeInfo

HOSTNAME = "kubernetes.io/hostname"
MAX_PODS = 110
PodKey = tuple[str, str]
# A topology domain: (node label, value).
Pin = tuple[str, str]


# kube-scheduler's NodeResourcesFit scoring strategies the model knows, its default first.
SCORINGS = ("LeastAllocated", "MostAllocated")


# The level whose domains are whole NVLink domains side by side (GKE's block label, as the
# sandbox labels its nodes): a block is `domains_per_block` domains.
BLOCK_LABEL = "cloud.google.com/gce-topology-block"


@dataclass(frozen=True, slots=True)
class Shape:
    nodes: int = 16
    gpus_per_node: int = 8
    nodes_per_domain: int = 4
    domains_per_block: int = 2
    # kube-scheduler's NodeResourcesFit scoring: `LeastAllocated` (its default: the
    # emptiest node) or `MostAllocated` (bin-packing).
    scoring: str = "LeastAllocated"

    @property
    def capacity(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def domain_capacity(self) -> int:
        return min(self.nodes_per_domain, self.nodes) * self.gpus_per_node


@dataclass(frozen=True, slots=True)
class Resident:
    priority: int
    gpus: int
    bound: float


class Cluster:
    """`priorities`: every priority a pod may have, to index the room each node would
    have for a preemptor (its free GPUs plus those of pods it may evict)."""

    def __init__(self, shape: Shape, topology_labels: Iterable[str], resource: str,
                 priorities: Iterable[int]) -> None:
        self.shape = shape
        self.resource = resource
        g = shape.gpus_per_node
        self.names = [f"node-{i:05d}" for i in range(shape.nodes)]
        self.index = {n: i for i, n in enumerate(self.names)}
        per = max(shape.nodes_per_domain, 1)
        per_block = per * max(shape.domains_per_block, 1)

        def label(key: str, i: int, name: str) -> str:
            if key == HOSTNAME:
                return name
            if key == BLOCK_LABEL:
                return f"block-{i // per_block:04d}"
            return f"domain-{i // per:04d}"

        # Every topology level's label: the node's name for the host level, its block,
        # else its domain (`nodes_per_domain` nodes each).
        self.labels: list[dict[str, str]] = [
            {key: label(key, i, name) for key in {HOSTNAME, *topology_labels}}
            for i, name in enumerate(self.names)]
        self.domains: dict[Pin, list[int]] = {}
        for i, labels in enumerate(self.labels):
            for key, value in labels.items():
                self.domains.setdefault((key, value), []).append(i)
        self.free = [g] * shape.nodes
        self.residents: list[dict[PodKey, Resident]] = [{} for _ in self.names]
        # Nodes by free GPUs (0..g), in node order: the bin-packing pick is a lookup.
        self.by_free: list[dict[int, None]] = [{} for _ in range(g + 1)]
        self.by_free[g] = dict.fromkeys(range(shape.nodes))
        # The same buckets as heaps of node numbers (with stale entries, skipped), so a
        # tie goes to the first node in node order, as the controller's fit breaks it.
        self._first: list[list[int]] = [[] for _ in range(g + 1)]
        self._first[g] = list(range(shape.nodes))
        # room[l][i]: node i's free GPUs plus those of its pods at priority <= levels[l];
        # by_room[l][n]: the nodes with room n at level l.
        self.levels = sorted(set(priorities))
        self.room = [[g] * shape.nodes for _ in self.levels]
        self.by_room = [[{} if n < g else dict.fromkeys(range(shape.nodes))
                         for n in range(g + 1)] for _ in self.levels]

    @staticmethod
    def _rebucket(buckets: list[dict[int, None]], values: list[int], i: int,
                  value: int) -> None:
        del buckets[values[i]][i]
        values[i] = value
        # Insertion order: ties go to the node that got there first, the same way on
        # every run.
        buckets[value][i] = None

    def _change(self, i: int, resident: Resident, sign: int) -> None:
        delta = sign * resident.gpus
        self._rebucket(self.by_free, self.free, i, self.free[i] + delta)
        heapq.heappush(self._first[self.free[i]], i)
        for level, (priority, room) in enumerate(zip(self.levels, self.room, strict=True)):
            if priority < resident.priority:
                self._rebucket(self.by_room[level], room, i, room[i] + delta)

    def bind(self, i: int, key: PodKey, resident: Resident) -> None:
        self.residents[i][key] = resident
        self._change(i, resident, -1)

    def release(self, i: int, key: PodKey) -> None:
        self._change(i, self.residents[i].pop(key), +1)

    def largest(self, key: str) -> int:
        """The GPUs of the largest domain of the level labelled `key`."""
        return max((len(nodes) for (k, _), nodes in self.domains.items() if k == key),
                   default=0) * self.shape.gpus_per_node

    def pick(self, gpus: int, pin: Pin | None, off: frozenset[int] = frozenset()
             ) -> int | None:
        """The node the scheduler binds a pod of `gpus` to, or None; never one of `off`
        (the nodes its affinity excludes)."""
        packing = self.shape.scoring == "MostAllocated"
        if pin is None:
            g = self.shape.gpus_per_node
            for free in (range(gpus, g + 1) if packing else range(g, gpus - 1, -1)):
                bucket, first = self.by_free[free], self._first[free]
                if off:
                    found = min((i for i in bucket if i not in off), default=None)
                    if found is not None:
                        return found
                    continue
                while first and first[0] not in bucket:
                    heapq.heappop(first)
                if first:
                    return first[0]
            return None
        best: int | None = None
        for i in self.domains.get(pin, ()):  # in node order
            if self.free[i] < gpus or i in off:
                continue
            if best is None or (self.free[i] < self.free[best] if packing
                                else self.free[i] > self.free[best]):
                best = i
        return best

    def victims(self, gpus: int, priority: int, pin: Pin | None,
                off: frozenset[int] = frozenset()) -> tuple[int, list[PodKey]] | None:
        """Where a pod of `gpus` at `priority` gets room by evicting lower-priority pods,
        and which; None when no node (but those `off`) can make room. The node: the lowest
        highest-victim priority, then the least room (the fewest GPUs freed beyond the
        need)."""
        g = self.shape.gpus_per_node
        for level, top in enumerate(self.levels):
            if top >= priority:
                break
            if pin is None:
                node = next((i for n in range(gpus, g + 1) for i in self.by_room[level][n]
                             if i not in off), None)
            else:
                room = self.room[level]
                fitting = [i for i in self.domains.get(pin, ())
                           if room[i] >= gpus and i not in off]
                node = min(fitting, key=lambda i: room[i]) if fitting else None
            if node is not None:
                return node, self._evictable(node, gpus, top)
        return None

    def _evictable(self, i: int, gpus: int, top: int) -> list[PodKey]:
        """The pods to evict on node i, lowest priority first, youngest first among
        equals, only as many as needed."""
        residents = self.residents[i]
        lower = sorted((r.priority, -r.bound, key) for key, r in residents.items()
                       if r.priority <= top)
        free, chosen = self.free[i], []
        for _, _, key in lower:
            if free >= gpus:
                break
            free += residents[key].gpus
            chosen.append(key)
        return chosen

    def node_views(self) -> list[NodeInfo]:
        """Every node as the controller sees it, with all its capacity allocatable (the
        pods running on it are tracked beside it)."""
        return [NodeInfo(name=name, labels=labels, taints=(),
                         allocatable={self.resource: self.shape.gpus_per_node,
                                      "pods": MAX_PODS},
                         ready=True, unschedulable=False)
                for name, labels in zip(self.names, self.labels, strict=True)]
