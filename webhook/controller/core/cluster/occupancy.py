"""Who holds the GPUs: the GPU-equivalents each bound, active pod holds (and their totals
per namespace), the pods on each node, each node's holders in the victim order's first
terms (priority, then start), the room below a priority, and what evicting on a set of
nodes would cost. One of the tracked cluster's indexes (`tracking`); it owns its data and
keeps it current as pods and nodes change, so preemption asks it in a look, not a pass."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.identities import PodKey
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.costs import Costs, Holder, Part, part_of


def holder_of(pod: PodInfo, gpus: GpuEquivalents) -> Holder:
    return Holder(pod.priority, pod.started, gpus, pod.key, pod.checkpointed)


class Occupancy:
    def __init__(self) -> None:
        # The GPU-equivalents each bound, active pod holds.
        self.gpus_of: dict[PodKey, GpuEquivalents] = {}
        self.namespace_gpus: dict[str, GpuEquivalents] = {}
        self.on_node: dict[str, set[PodKey]] = {}
        # Node -> its holders, lowest priority first.
        self.holders: dict[str, list[Holder]] = {}
        # (priority, GPUs) -> per node, and in all, how many pods of those GPUs would fit
        # were every started pod below that priority gone: asked by preemption, kept as
        # nodes change, so a gang with no hope of room anywhere is told in one look.
        self._room_parts: dict[tuple[int, GpuEquivalents], dict[str, int]] = {}
        self._room_totals: dict[tuple[int, GpuEquivalents], int] = {}
        # What evicting on a set of nodes would cost (`costs`), per name the caller
        # gives the set and namespaces it spares, and node -> the names of sets it is in.
        self._costs: dict[tuple[object, ...], Costs] = {}
        self._costs_on: dict[str, set[tuple[object, ...]]] = {}
        # Per spared namespaces, each node's holders as a part of those costs: a set is
        # built again when one of its nodes changes, from its nodes' parts.
        self._parts: dict[frozenset[str], dict[str, Part]] = {}

    def bind(self, pod: PodInfo, node: str, gpus: GpuEquivalents) -> None:
        """A bound, active pod: on `node`, holding `gpus`."""
        key = pod.key
        self.on_node.setdefault(node, set()).add(key)
        if gpus:
            self.gpus_of[key] = gpus
            self.namespace_gpus[key.namespace] = self.namespace_gpus.get(key.namespace, 0) \
                + gpus
            bisect.insort(self.holders.setdefault(node, []), holder_of(pod, gpus))

    def unbind(self, pod: PodInfo, node: str) -> None:
        key = pod.key
        on = self.on_node.get(node)
        if on is not None:
            on.discard(key)
            if not on:
                del self.on_node[node]
        gpus = self.gpus_of.pop(key, 0)
        if gpus:
            self.namespace_gpus[key.namespace] -= gpus
            holders = self.holders[node]
            holders.remove(holder_of(pod, gpus))
            if not holders:
                del self.holders[node]

    def clear(self) -> None:
        """Forget every holder (the GPUs are counted anew)."""
        self.gpus_of, self.namespace_gpus, self.holders = {}, {}, {}
        self.on_node = {}
        self._room_parts.clear()
        self._room_totals.clear()
        self.forget_costs()

    def forget_costs(self) -> None:
        self._costs.clear()
        self._costs_on.clear()
        self._parts.clear()

    def touched(self, node: str, free_gpu: GpuEquivalents | None) -> None:
        """`node` changed (its holders or its free GPUs, now `free_gpu`; None: the node is
        gone): keep the room below each priority asked about current for it, and forget
        the costs of evicting on sets of nodes that hold it."""
        for key in self._costs_on.pop(node, ()):
            self._costs.pop(key, None)
        for by_node in self._parts.values():
            by_node.pop(node, None)
        for (priority, size), parts in self._room_parts.items():
            now = self._room_below(node, free_gpu, priority) // size
            before = parts.pop(node, 0)
            if now:
                parts[node] = now
            self._room_totals[priority, size] += now - before

    def _room_below(self, node: str, free_gpu: GpuEquivalents | None, priority: int
                    ) -> GpuEquivalents:
        if free_gpu is None:
            return 0
        room = max(free_gpu, 0)
        for h in self.holders.get(node, ()):
            if h.priority >= priority:
                break
            if h.started:
                room += h.gpus
        return room

    def room_below(self, priority: int, size: GpuEquivalents,
                   free_gpu: dict[str, GpuEquivalents]) -> int:
        """How many pods of `size` GPUs the nodes (`free_gpu`: what each has free) could
        take, each on one node, were every started pod below `priority` gone: an upper
        bound on what preemption could ever make room for (eligibility, minimum runtimes
        and budgets not weighed)."""
        key = priority, size
        total = self._room_totals.get(key)
        if total is None:
            parts = {n: fit for n, free in free_gpu.items()
                     if (fit := self._room_below(n, free, priority) // size)}
            self._room_parts[key] = parts
            total = self._room_totals[key] = sum(parts.values())
        return total

    def costs(self, name: tuple[object, ...], nodes: Sequence[str], spared: frozenset[str]
              ) -> Costs:
        """What evicting pods on `nodes` (a set the caller names, e.g. a domain), but
        those in a `spared` namespace, would cost; built again once a pod there changes."""
        key = (*name, spared)
        found = self._costs.get(key)
        if found is None:
            found = self._costs[key] = Costs(parts=[self._part(n, spared) for n in nodes])
            for n in nodes:
                self._costs_on.setdefault(n, set()).add(key)
        return found

    def _part(self, node: str, spared: frozenset[str]) -> Part:
        parts = self._parts.get(spared)
        if parts is None:
            parts = self._parts[spared] = {}
        found = parts.get(node)
        if found is None:
            found = parts[node] = part_of(h for h in self.holders.get(node, ())
                                          if h.pod.namespace not in spared)
        return found
