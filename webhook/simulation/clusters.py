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
from webhook.pools import BLOCK_LABEL, HOST_LABEL, Placed, Pool, layout, validated

MAX_PODS = 110
PodKey = tuple[str, str]
# A topology domain: (node label, value).
Pin = tuple[str, str]
# A pod's nodeSelector, sorted: the labels a node must carry.
Selector = tuple[Pin, ...]


# kube-scheduler's NodeResourcesFit scoring strategies the model knows, its default first.
SCORINGS = ("LeastAllocated", "MostAllocated")


@dataclass(frozen=True, slots=True)
class Shape:
    """`nodes` of `gpus_per_node` in domains of `nodes_per_domain` (blocks of
    `domains_per_block` domains side by side, as the sandbox labels them with GKE's block
    label); or `pools` of nodes of other models and sizes in place of those."""

    nodes: int = 16
    gpus_per_node: int = 8
    nodes_per_domain: int = 4
    domains_per_block: int = 2
    # kube-scheduler's NodeResourcesFit scoring: `LeastAllocated` (its default: the
    # emptiest node) or `MostAllocated` (bin-packing).
    scoring: str = "LeastAllocated"
    pools: tuple[Pool, ...] = ()

    def node_pools(self) -> tuple[Pool, ...]:
        """The pools, or the uniform one, its nodes named node-00000, ...; PoolError for
        fields no pool may have."""
        return self.pools or validated({"pools": [{
            "name": "node", "model": "h100", "count": self.nodes,
            "gpusPerNode": self.gpus_per_node, "nodesPerDomain": self.nodes_per_domain,
            "domainsPerBlock": self.domains_per_block}]},
            "the pool of --nodes (count), --gpus-per-node and --nodes-per-domain")

    @property
    def capacity(self) -> int:
        return sum(p.gpus for p in self.node_pools())

    def described(self) -> dict[str, object]:
        """The cluster in a run's figures."""
        if not self.pools:
            return {"nodes": self.nodes, "gpusPerNode": self.gpus_per_node,
                    "nodesPerDomain": self.nodes_per_domain, "gpus": self.capacity}
        return {"nodes": sum(p.count for p in self.pools), "gpus": self.capacity,
                "pools": [{"name": p.name, "product": p.product, "count": p.count,
                           "gpusPerNode": p.gpus_per_node,
                           "nodesPerDomain": p.nodes_per_domain} for p in self.pools]}


def _labels(node: Placed, name: str, keys: Iterable[str]) -> dict[str, str]:
    """The pool's labels, and every topology level's that the node is in: its own name for
    the host level, its block, else its domain (none in a pool without NVLink)."""
    labels = node.pool.node_labels()
    for key in keys:
        if key == HOST_LABEL:
            labels[key] = name
        elif node.domain is not None:
            labels[key] = f"block-{node.block:04d}" if key == BLOCK_LABEL \
                else f"domain-{node.domain:04d}"
    return labels


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
        placed = list(layout(shape.node_pools()))
        self.names = [f"{n.pool.name}-{n.index:05d}" for n in placed]
        self.index = {n: i for i, n in enumerate(self.names)}
        self.gpus = [n.pool.gpus_per_node for n in placed]
        self.most = max(self.gpus)
        keys = {HOST_LABEL, *topology_labels}
        self.labels: list[dict[str, str]] = [
            _labels(node, name, keys) for node, name in zip(placed, self.names, strict=True)]
        # Every label's nodes: the topology domains, and the pools' models a pod selects.
        self.domains: dict[Pin, list[int]] = {}
        for i, labels in enumerate(self.labels):
            for key, value in labels.items():
                self.domains.setdefault((key, value), []).append(i)
        self._matching: dict[tuple[Pin | None, Selector], list[int]] = {}
        self._largest: dict[tuple[str, Selector], int] = {}
        self._selected: dict[Selector, tuple[int, int]] = {}
        self.free = list(self.gpus)
        self.residents: list[dict[PodKey, Resident]] = [{} for _ in self.names]
        # Nodes by free GPUs (0..most), in node order: the bin-packing pick is a lookup.
        self.by_free = self._buckets(self.free)
        # The same buckets as heaps of node numbers (with stale entries, skipped), so a
        # tie goes to the first node in node order, as the controller's fit breaks it.
        # Filled in node order, each list is a heap already.
        self._first: list[list[int]] = [list(bucket) for bucket in self.by_free]
        # room[l][i]: node i's free GPUs plus those of its pods at priority <= levels[l];
        # by_room[l][n]: the nodes with room n at level l.
        self.levels = sorted(set(priorities))
        self.room = [list(self.gpus) for _ in self.levels]
        self.by_room = [self._buckets(room) for room in self.room]

    def _buckets(self, values: list[int]) -> list[dict[int, None]]:
        buckets: list[dict[int, None]] = [{} for _ in range(self.most + 1)]
        for i, value in enumerate(values):
            buckets[value][i] = None
        return buckets

    def matching(self, pin: Pin | None, selector: Selector = ()) -> list[int]:
        """The nodes, in node order, in the domain `pin` and carrying every label of
        `selector` (a pod's nodeSelector); one of the two at least."""
        key = (pin, selector)
        found = self._matching.get(key)
        if found is None:
            wanted = [*([pin] if pin else []), *selector]
            first, *rest = [self.domains.get(w, []) for w in wanted]
            others = [set(r) for r in rest]
            found = self._matching[key] = [i for i in first if all(i in o for o in others)]
        return found

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

    def selected(self, selector: Selector = ()) -> tuple[int, int]:
        """The GPUs of the largest node `selector` selects, and of all of them: asked of
        every job of a trace, once per selector."""
        found = self._selected.get(selector)
        if found is None:
            nodes = self.matching(None, selector) if selector else range(len(self.names))
            gpus = [self.gpus[i] for i in nodes]
            found = self._selected[selector] = max(gpus, default=0), sum(gpus)
        return found

    def largest(self, key: str, selector: Selector = ()) -> int:
        """The GPUs of the largest domain of the level labelled `key`, on the nodes
        `selector` selects."""
        found = self._largest.get((key, selector))
        if found is None:
            found = self._largest[(key, selector)] = max(
                (sum(self.gpus[i] for i in self.matching(domain, selector))
                 for domain in self.domains if domain[0] == key), default=0)
        return found

    def pick(self, gpus: int, pin: Pin | None, off: frozenset[int] = frozenset(),
             selector: Selector = ()) -> int | None:
        """The node the scheduler binds a pod of `gpus` to, or None; never one of `off`
        (the nodes its affinity excludes), always one `selector` selects."""
        packing = self.shape.scoring == "MostAllocated"
        if pin is None and not selector:
            g = self.most
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
        for i in self.matching(pin, selector):  # in node order
            if self.free[i] < gpus or i in off:
                continue
            if best is None or (self.free[i] < self.free[best] if packing
                                else self.free[i] > self.free[best]):
                best = i
        return best

    def pick_any(self, gpus: int, pin: Pin | None, off: frozenset[int],
                 selectors: tuple[Selector, ...]) -> int | None:
        """`pick` for a pod whose node must carry one of the label sets `selectors` (one
        per required node affinity term): the best of each set's best."""
        if len(selectors) == 1:
            return self.pick(gpus, pin, off, selectors[0])
        found = [n for s in selectors if (n := self.pick(gpus, pin, off, s)) is not None]
        if not found:
            return None
        if self.shape.scoring == "MostAllocated":
            return min(found, key=lambda i: (self.free[i], i))
        return min(found, key=lambda i: (-self.free[i], i))

    def victims_any(self, gpus: int, priority: int, pin: Pin | None, off: frozenset[int],
                    selectors: tuple[Selector, ...]) -> tuple[int, list[PodKey]] | None:
        """`victims` for a pod whose node must carry one of the label sets `selectors`:
        the first set's where it has any."""
        return next((found for s in selectors
                     if (found := self.victims(gpus, priority, pin, off, s)) is not None),
                    None)

    def victims(self, gpus: int, priority: int, pin: Pin | None,
                off: frozenset[int] = frozenset(), selector: Selector = ()
                ) -> tuple[int, list[PodKey]] | None:
        """Where a pod of `gpus` at `priority` gets room by evicting lower-priority pods,
        and which; None when no node (but those `off`) can make room. The node: the lowest
        highest-victim priority, then the least room (the fewest GPUs freed beyond the
        need)."""
        g = self.most
        for level, top in enumerate(self.levels):
            if top >= priority:
                break
            if pin is None and not selector:
                node = next((i for n in range(gpus, g + 1) for i in self.by_room[level][n]
                             if i not in off), None)
            else:
                room = self.room[level]
                fitting = [i for i in self.matching(pin, selector)
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
                         allocatable={self.resource: gpus, "pods": MAX_PODS},
                         ready=True, unschedulable=False)
                for name, labels, gpus in zip(self.names, self.labels, self.gpus, strict=True)]
