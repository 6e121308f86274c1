"""Where room is: each node's free capacity as bound pods come and go, and which nodes
(and topology domains) each kind of pod may use, kept as nodes change. One of the tracked
cluster's indexes (`tracking`); it owns its data and keeps it current.

A node's free map is replaced, never changed in place, so a snapshot's copy of the maps
stays what the round started from."""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.filters import eligible
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.resources import Resources

Count = Callable[[Resources], GpuEquivalents]
Signature = tuple[Any, ...]

# The topology key under which all of a pod's eligible nodes are one domain, named "" (no
# node label has an empty key): its room tells in one look whether a gang could pack
# anywhere at all.
EVERYWHERE: Final = ""


class Room:
    """Free GPUs on a set of nodes: their total, and how many nodes have each amount
    free. Kept as nodes change, it tells whether a gang could pack there in a look at
    the few distinct amounts, not at every node."""

    __slots__ = ("counts", "total")

    def __init__(self, free: Iterable[GpuEquivalents] = ()) -> None:
        self.total: GpuEquivalents = 0
        self.counts: dict[GpuEquivalents, int] = {}
        for amount in free:
            if amount > 0:
                self.total += amount
                self.counts[amount] = self.counts.get(amount, 0) + 1

    def copy(self) -> Room:
        room = Room()
        room.total, room.counts = self.total, dict(self.counts)
        return room

    def moved(self, before: GpuEquivalents, after: GpuEquivalents) -> None:
        """A node of the set went from `before` free GPUs to `after`."""
        before, after = max(before, 0), max(after, 0)
        if before == after:
            return
        self.total += after - before
        if before:
            self.counts[before] -= 1
        if after:
            self.counts[after] = self.counts.get(after, 0) + 1

    def could_pack(self, sizes: Sequence[GpuEquivalents]) -> bool:
        """Whether pods of `sizes` GPUs (largest first) could go on these nodes, counting
        GPUs only: a necessary condition. Each pod takes the first node with room, most
        free first; no pod ever needs more than one node of any amount per pod."""
        if sizes and sizes[0] == sizes[-1] and sizes[0] > 0:
            # Pods all alike: first fit fills each node in turn with as many as it
            # holds, so counting them is the same answer as placing them one by one
            # (a hundred pods over a thousand amounts was most of a preemption's cost).
            size, count = sizes[0], len(sizes)
            return sum(min(c, count) * int(a // size) for a, c in self.counts.items()
                       if c > 0) >= count
        left: list[GpuEquivalents] = []
        for amount in sorted((a for a, c in self.counts.items() if c > 0), reverse=True):
            left.extend([amount] * min(self.counts[amount], len(sizes)))
        for size in sizes:
            for i, room in enumerate(left):
                if room >= size:
                    left[i] = room - size
                    break
            else:
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Room) and (self.total, {a: c for a, c in self.counts.items()
                                                         if c}) == \
            (other.total, {a: c for a, c in other.counts.items() if c})

    __hash__ = None  # type: ignore[assignment]


class FreeIndex:
    """A pod's eligible nodes by their free GPUs, each amount's nodes in eligible order:
    best fit over thousands of nodes looks at the few amounts that could take a pod, not
    at every node. Kept as pods come and go, and copied by a round's snapshot, which
    keeps its copy as it takes."""

    __slots__ = ("buckets", "levels", "nodes", "position")

    def __init__(self, nodes: list[str], free_gpu: dict[str, GpuEquivalents]) -> None:
        self.nodes = nodes
        self.position = {n: i for i, n in enumerate(nodes)}
        self.buckets: dict[GpuEquivalents, list[int]] = {}
        for i, node in enumerate(nodes):
            self.buckets.setdefault(free_gpu[node], []).append(i)
        self.levels = sorted(self.buckets)

    def copy(self) -> FreeIndex:
        """The same index, its amounts its own (the nodes and their order shared)."""
        found = FreeIndex.__new__(FreeIndex)
        found.nodes, found.position = self.nodes, self.position
        found.buckets = {level: list(at) for level, at in self.buckets.items()}
        found.levels = list(self.levels)
        return found

    def moved(self, node: str, before: GpuEquivalents, after: GpuEquivalents) -> None:
        position = self.position.get(node)
        if position is None or before == after:
            return
        self.buckets[before].remove(position)
        if after not in self.buckets:
            self.buckets[after] = []
            bisect.insort(self.levels, after)
        bisect.insort(self.buckets[after], position)


def with_pod_slot(requests: Resources) -> Resources:
    return {**requests, "pods": 1}


def fits(free: Resources, requests: Resources) -> bool:
    # A resource the node does not report, it has none of: the scheduler's
    # NodeResourcesFit refuses a pod asking for ephemeral storage on a node that reports
    # none, as it refuses one asking for a GPU there.
    return all(v <= 0 or free.get(k, 0) >= v for k, v in requests.items())


def _minus(allocatable: Resources, used: Resources | None) -> Resources:
    if not used:
        return allocatable
    free = dict(allocatable)
    for k, v in used.items():
        free[k] = free.get(k, 0) - v
    return free


def _placement_changed(old: NodeInfo, new: NodeInfo) -> bool:
    """Whether a node update can change which pods may use the node (a heartbeat
    cannot)."""
    return (old.labels != new.labels or old.taints != new.taints or old.ready != new.ready
            or old.unschedulable != new.unschedulable or old.allocatable != new.allocatable)


class Capacity:
    def __init__(self, gpus: Count) -> None:
        self.gpus = gpus
        self.nodes: dict[str, NodeInfo] = {}
        # What bound, active pods request per node name (the pod slot included), whether
        # the node is known or not: a node that comes back finds its pods counted.
        self._used: dict[str, Resources] = {}
        self.free: dict[str, Resources] = {}
        self.free_gpu: dict[str, GpuEquivalents] = {}
        # GPUs of every ready node.
        self.total: GpuEquivalents = 0
        # Bumped whenever which nodes a pod may use can have changed: what others derive
        # from sets of nodes (a domain's costs) is then to be made again.
        self.placements = 0
        self._eligible: dict[Signature, list[str]] = {}
        self._eligible_sets: dict[Signature, frozenset[str]] = {}
        self._domains: dict[tuple[Any, ...], dict[str, list[str]]] = {}
        self._capacities: dict[tuple[Any, ...], list[tuple[GpuEquivalents, GpuEquivalents]]] = {}
        self._domain_rooms: dict[tuple[Any, ...], dict[str, Room]] = {}
        self._held: dict[tuple[Any, ...], bool] = {}
        self._indexes: dict[Signature, FreeIndex] = {}

    def count_as(self, gpus: Count) -> None:
        """Count GPUs with `gpus` from now on (the accelerators changed)."""
        self.gpus = gpus
        self.free_gpu = {n: gpus(free) for n, free in self.free.items()}
        self.total = sum(gpus(n.allocatable) for n in self.nodes.values() if n.ready)
        self._domain_rooms.clear()
        self._indexes.clear()

    # --- what bound pods take --------------------------------------------------------

    def use(self, node: str, requests: Resources, sign: int) -> None:
        """A bound pod's `requests` are taken on `node` (`sign` 1) or given back (-1)."""
        used = self._used.setdefault(node, {})
        for k, v in requests.items():
            used[k] = used.get(k, 0) + sign * v
        if node in self.nodes:
            # A new map, not a change to the old one: a snapshot may hold the old one.
            free = self.free[node] = dict(self.free[node])
            for k, v in requests.items():
                free[k] = free.get(k, 0) - sign * v
            before = self.free_gpu[node]
            self.free_gpu[node] = after = self.gpus(free)
            self.domain_rooms_moved(self._domain_rooms, node, before, after)
            for index in self._indexes.values():
                index.moved(node, before, after)

    # --- nodes -------------------------------------------------------------------------

    def put_node(self, node: NodeInfo) -> bool:
        """Whether anything changed."""
        name = node.name
        old = self.nodes.get(name)
        if old == node:
            return False
        self.nodes[name] = node
        if old is None or old.allocatable != node.allocatable:
            free = self.free[name] = _minus(node.allocatable, self._used.get(name))
            self.free_gpu[name] = self.gpus(free)
        self.total += self._ready_gpus(node) - (self._ready_gpus(old) if old else 0)
        if old is None or _placement_changed(old, node):
            self._placements_changed()
        return True

    def drop_node(self, name: str) -> bool:
        """Whether the node was known."""
        old = self.nodes.pop(name, None)
        if old is None:
            return False
        del self.free[name], self.free_gpu[name]
        self.total -= self._ready_gpus(old)
        self._placements_changed()
        return True

    def _ready_gpus(self, node: NodeInfo) -> GpuEquivalents:
        return self.gpus(node.allocatable) if node.ready else 0

    def _placements_changed(self) -> None:
        self.placements += 1
        self._eligible.clear()
        self._eligible_sets.clear()
        self._domains.clear()
        self._capacities.clear()
        self._domain_rooms.clear()
        self._held.clear()
        self._indexes.clear()

    # --- what rounds read ----------------------------------------------------------------

    def eligible_nodes(self, pod: PodInfo) -> list[str]:
        """Nodes the pod may use at all; cached per scheduling signature, since the pods
        of a gang, and of many gangs, mostly share one, until a node changes."""
        sig = pod.constraints.signature
        found = self._eligible.get(sig)
        if found is None:
            found = [n for n, info in self.nodes.items() if eligible(pod, info)]
            self._eligible[sig] = found
        return found

    def eligible_set(self, pod: PodInfo) -> frozenset[str]:
        sig = pod.constraints.signature
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self.eligible_nodes(pod))
        return found

    def _eligible_set_of(self, sig: Signature) -> frozenset[str]:
        """The eligible nodes of a signature already asked about."""
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self._eligible[sig])
        return found

    def domains(self, pod: PodInfo, topology_key: str) -> dict[str, list[str]]:
        """The pod's eligible nodes by their value of the topology label."""
        key = (pod.constraints.signature, topology_key)
        found = self._domains.get(key)
        if found is None and topology_key == EVERYWHERE:
            found = self._domains[key] = {EVERYWHERE: self.eligible_nodes(pod)}
        if found is None:
            found = {}
            nodes = self.nodes
            for name in self.eligible_nodes(pod):
                value = nodes[name].labels.get(topology_key)
                if value is not None:
                    found.setdefault(value, []).append(name)
            self._domains[key] = found
        return found

    def domain_rooms(self, pod: PodInfo, topology_key: str) -> dict[str, Room]:
        """The free GPUs of each domain over the pod's eligible nodes, kept current as
        pods come and go (a round copies what it reads: summing every node per round was
        most of a round in a simulation of thousands of nodes)."""
        key = (pod.constraints.signature, topology_key)
        found = self._domain_rooms.get(key)
        if found is None:
            free_gpu = self.free_gpu
            found = self._domain_rooms[key] = {
                name: Room(free_gpu[n] for n in nodes)
                for name, nodes in self.domains(pod, topology_key).items()}
        return found

    def domain_rooms_moved(self, rooms: dict[tuple[Any, ...], dict[str, Room]], node: str,
                           before: GpuEquivalents, after: GpuEquivalents) -> None:
        """`node` went from `before` free GPUs to `after`, in the domain `rooms` it is in."""
        if max(before, 0) == max(after, 0):
            return
        labels = self.nodes[node].labels
        for (sig, key), by_domain in rooms.items():
            value = labels.get(key) if key != EVERYWHERE else EVERYWHERE
            if value is not None and node in self._eligible_set_of(sig):
                by_domain[value].moved(before, after)

    def free_index(self, pod: PodInfo) -> FreeIndex:
        """The pod's eligible nodes by free GPUs, kept as pods bind and go."""
        sig = pod.constraints.signature
        found = self._indexes.get(sig)
        if found is None:
            found = self._indexes[sig] = FreeIndex(self.eligible_nodes(pod), self.free_gpu)
        return found

    def could_hold(self, pod: PodInfo) -> bool:
        """Whether one of the pod's eligible nodes could hold it were the node empty,
        counting every resource it requests (CPU, memory, devices), not GPUs alone. A
        pod no node could ever hold waits for nothing the queue can give it."""
        found = self._held.get(pod.fit)
        if found is None:
            need, nodes = with_pod_slot(pod.requests), self.nodes
            found = self._held[pod.fit] = any(fits(nodes[n].allocatable, need)
                                              for n in self.eligible_nodes(pod))
        return found

    def capacities(self, pod: PodInfo, topology_key: str | None
                   ) -> list[tuple[GpuEquivalents, GpuEquivalents]]:
        """What the pod's eligible nodes have, used or not, per domain of the topology
        label (all of them as one, without a label): the GPUs of each domain's nodes and
        of its largest node, most GPUs first. No wait can get a gang more."""
        key = (pod.constraints.signature, topology_key)
        found = self._capacities.get(key)
        if found is None:
            nodes, gpus = self.nodes, self.gpus
            groups = ([self.eligible_nodes(pod)] if topology_key is None
                      else self.domains(pod, topology_key).values())
            found = []
            for names in groups:
                sizes = [gpus(nodes[n].allocatable) for n in names]
                found.append((sum(sizes), max(sizes, default=0)))
            found.sort(reverse=True)
            self._capacities[key] = found
        return found
