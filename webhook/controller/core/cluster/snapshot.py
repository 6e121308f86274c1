"""The cluster as one round of decisions sees it: every node's free capacity (allocatable
minus what bound pods request minus what is promised to pods that were let go but are
not bound yet), read from the tracked cluster at the start of the round. Decisions take
from it, so two gangs are never promised the same GPUs; the tracked cluster itself is
left as it was.

A what-if (the victims a preemption would free, a gang tried elsewhere) runs on a fork:
a copy-on-write view that starts as the snapshot is and takes from its own copy of a
node's room, so whatever it tries leaves the round's snapshot as it was. Forking copies
the two maps of nodes, not the nodes' room: a node's map is copied when a fork first
takes from it."""

from __future__ import annotations

import bisect
import copy
from collections.abc import Iterable, Sequence
from typing import Any

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.capacity import (
    EVERYWHERE,
    FreeIndex,
    Room,
    fits,
    with_pod_slot,
)
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.gangs import Gang
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.resources import Resources

__all__ = ["FreeIndex", "Room", "Snapshot", "fits", "with_pod_slot"]


class Snapshot:
    def __init__(self, cluster: Tracked) -> None:
        self.cluster = cluster
        self.capacity = capacity = cluster.capacity
        self.accelerators = cluster.accelerators
        self.gpus = cluster.accelerators.count
        self.nodes = capacity.nodes
        # The maps of free capacity are the tracked cluster's (or the forked snapshot's)
        # until something is taken from a node, then its own copy: most nodes of a round
        # are never touched.
        self.free: dict[str, Resources] = dict(capacity.free)
        self._own: set[str] = set()
        # Nodes whose room differs from the tracked cluster's.
        self._changed: set[str] = set()
        # Free GPUs per node, kept in step with `free`: fit asks for it per node per domain.
        self.free_gpu: dict[str, GpuEquivalents] = dict(capacity.free_gpu)
        self.eligible_nodes = capacity.eligible_nodes
        self.eligible_set = capacity.eligible_set
        self.domains = capacity.domains
        self.capacities = capacity.capacities
        self.could_hold = capacity.could_hold
        self._domain_rooms: dict[tuple[Any, ...], dict[str, Room]] = {}
        self._ranked: dict[tuple[Any, ...], list[tuple[GpuEquivalents, str]]] = {}
        self._ranked_free: dict[tuple[Any, ...], dict[str, GpuEquivalents]] = {}
        self._indexes: dict[Any, FreeIndex] = {}
        # Whether the room of pods being deleted is free here (`once_gone`).
        self.leaving_given = False

    def fork(self) -> Snapshot:
        """A view that starts as this one is, for a what-if: what it takes stays its
        own."""
        fork = copy.copy(self)
        fork.free, fork.free_gpu = dict(self.free), dict(self.free_gpu)
        fork._own, fork._changed = set(), set(self._changed)
        fork._domain_rooms, fork._ranked, fork._indexes = {}, {}, {}
        fork._ranked_free = {}
        return fork

    def once_gone(self, also: Sequence[PodInfo] = ()) -> Snapshot | None:
        """A fork with the room that pods marked for deletion still hold given back, and
        that of the bound pods `also` (evicted, not yet marked), or None while no such pod
        holds any (or it was given back already: this is such a fork, or one of its
        forks)."""
        leaving = self.cluster.leaving
        if not (leaving or also) or self.leaving_given:
            return None
        fork, pods = self.fork(), self.cluster.pods
        fork.leaving_given = True
        held = [*((node, pods[key]) for key, node in leaving.items()),
                *((p.node_name, p) for p in also)]
        for node, pod in held:
            if node in fork.free:
                fork.take(node, {k: -v for k, v in with_pod_slot(pod.requests).items()})
        return fork

    def take(self, node: str, requests: Resources) -> None:
        """Take `requests` on `node` (negative amounts give room back)."""
        free = self.free[node]
        if node not in self._own:
            free = self.free[node] = dict(free)
            self._own.add(node)
            self._changed.add(node)
        for k, v in requests.items():
            free[k] = free.get(k, 0) - v
        before = self.free_gpu[node]
        self.free_gpu[node] = after = self.gpus(free)
        for index in self._indexes.values():
            index.moved(node, before, after)
        # Keep the domains' rooms in step: ranking domains then costs one sort, not a sum
        # over every node, per gang; and none while nothing is taken.
        if max(before, 0) != max(after, 0):
            self.capacity.domain_rooms_moved(self._domain_rooms, node, before, after)
            if self._ranked:
                self._rerank(node)

    def _rerank(self, node: str) -> None:
        """The domains ranked, kept in order as `node`'s domain's room moved: one entry
        moved, not a sort of every domain per gang admitted (a forecast admits
        thousands)."""
        labels = self.capacity.nodes[node].labels
        for key, ranked in self._ranked.items():
            value = labels.get(key[1]) if key[1] != EVERYWHERE else EVERYWHERE
            room = None if value is None else self._domain_rooms[key].get(value)
            if room is None or value is None:
                continue
            known = self._ranked_free[key]
            old = known[value]
            if old != room.total:
                del ranked[bisect.bisect_left(ranked, (old, value))]
                bisect.insort(ranked, (room.total, value))
                known[value] = room.total

    def domain_rooms(self, pod: PodInfo, topology_key: str) -> dict[str, Room]:
        """The free GPUs of each domain, over the pod's eligible nodes; kept current by
        `take`."""
        key = (pod.constraints.signature, topology_key)
        found = self._domain_rooms.get(key)
        if found is None:
            found = self._domain_rooms[key] = {
                name: room.copy()
                for name, room in self.capacity.domain_rooms(pod, topology_key).items()}
            # What this round took before it asked.
            tracked_gpu = self.capacity.free_gpu
            for node in self._changed:
                self.capacity.domain_rooms_moved({key: found}, node, tracked_gpu[node],
                                                 self.free_gpu[node])
        return found

    def free_index(self, pod: PodInfo) -> FreeIndex:
        """The pod's eligible nodes by free GPUs; kept current by `take`. The tracked
        cluster's, kept between rounds, copied with what this round took."""
        sig = pod.constraints.signature
        found = self._indexes.get(sig)
        if found is None:
            found = self._indexes[sig] = self.capacity.free_index(pod).copy()
            tracked_gpu = self.capacity.free_gpu
            for node in self._changed:
                found.moved(node, tracked_gpu[node], self.free_gpu[node])
        return found

    def domain_free(self, pod: PodInfo, topology_key: str) -> dict[str, GpuEquivalents]:
        """Free GPUs per domain, over the pod's eligible nodes."""
        return {name: room.total for name, room in self.domain_rooms(pod, topology_key).items()}

    def ranked(self, pod: PodInfo, topology_key: str) -> list[tuple[GpuEquivalents, str]]:
        """(free GPUs, domain), fewest free first: gangs that fit nowhere, one after the
        other, sort the domains once."""
        key = (pod.constraints.signature, topology_key)
        found = self._ranked.get(key)
        if found is None:
            free = self._ranked_free[key] = self.domain_free(pod, topology_key)
            found = self._ranked[key] = sorted((f, name) for name, f in free.items())
        return found

    def promised(self, pods: Iterable[PodInfo]) -> set[str]:
        """The nodes where the scheduler, which sees only bound pods, would find room for
        one of `pods` that this round has promised to pods let go but not bound yet
        (admitted now or before): a pod the scheduler places there strands them."""
        needs = {tuple(sorted(n.items())): n for n in (with_pod_slot(p.requests) for p in pods)}
        tracked = self.capacity.free
        return {node for node in self._changed for need in needs.values()
                if fits(tracked[node], need) and not fits(self.free[node], need)}

    def need(self, pods: Iterable[PodInfo]) -> GpuEquivalents:
        """GPUs the pods request together."""
        return sum(self.gpus(p.requests) for p in pods)

    def unit_need(self, gang: Gang, members: Sequence[PodInfo]) -> GpuEquivalents:
        """GPUs `members` of `gang` request together; all of a gang's members are counted
        once, not in every round they wait."""
        return gang.need(self.accelerators) if gang.whole(members) else self.need(members)

    def free_gpus(self, names: Iterable[str]) -> GpuEquivalents:
        free_gpu = self.free_gpu
        # A list, not a generator of `max` calls: preemption asks it of every domain.
        return sum([free if (free := free_gpu[n]) >= 0 else 0 for n in names])
