"""The cluster as the controller sees it for one round of decisions: every node's free
capacity (allocatable minus what bound pods request minus what is reserved for pods that
were let go but are not bound yet). Decisions reserve into it, so two gangs are never
promised the same GPUs.

GPUs here are GPU-equivalents of the policy's accelerators, plus any accelerator the
webhook recorded on a gang member admitted under an earlier policy."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.matching import eligible, signature
from webhook.controller.objects import NodeInfo, PodInfo, Resources


def with_pod_slot(requests: Resources) -> Resources:
    return {**requests, "pods": 1}


def fits(free: Resources, requests: Resources) -> bool:
    for k, v in requests.items():
        have = free.get(k)
        # A resource the node does not report at all is not one it can run out of
        # (ephemeral storage on nodes that don't say), unless it is extended.
        if have is None:
            if "/" in k and v > 0:
                return False
            continue
        if have < v:
            return False
    return True


class Snapshot:
    def __init__(self, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
                 accelerators: Accelerators) -> None:
        pods = list(pods)
        self.accelerators = accelerators.including(
            name for p in pods if p.accelerators for name in p.accelerators)
        self.gpus = self.accelerators.count
        self.nodes: dict[str, NodeInfo] = {n.name: n for n in nodes}
        # Each node's allocatable until something is taken from it, then its own copy:
        # most nodes of a round are never touched.
        self.free: dict[str, Resources] = {n: i.allocatable for n, i in self.nodes.items()}
        self._copied: set[str] = set()
        # Free GPUs per node, kept in step with `free`: fit asks for it per node per domain.
        self.free_gpu: dict[str, GpuEquivalents] = {
            n: self.gpus(r) for n, r in self.free.items()}
        self._eligible: dict[tuple[Any, ...], list[str]] = {}
        self._eligible_sets: dict[tuple[Any, ...], frozenset[str]] = {}
        self._domains: dict[tuple[Any, ...], dict[str, list[str]]] = {}
        self._domain_free: dict[tuple[Any, ...], dict[str, GpuEquivalents]] = {}
        for pod in pods:
            if pod.node_name and pod.active and pod.node_name in self.free:
                self.take(pod.node_name, with_pod_slot(pod.requests))

    def take(self, node: str, requests: Resources) -> None:
        free = self.free[node]
        if node not in self._copied:
            free = self.free[node] = dict(free)
            self._copied.add(node)
        for k, v in requests.items():
            free[k] = free.get(k, 0) - v
        before = max(self.free_gpu[node], 0)
        self.free_gpu[node] = self.gpus(free)
        delta = max(self.free_gpu[node], 0) - before
        if delta:
            # Keep the per-domain totals in step: ranking domains then costs one sort,
            # not a sum over every node, per gang.
            for (sig, key), totals in self._domain_free.items():
                value = self.nodes[node].labels.get(key)
                if value is not None and node in self._eligible_sets_by_sig(sig):
                    totals[value] += delta

    def eligible_nodes(self, pod: PodInfo) -> list[str]:
        """Nodes the pod may use at all; cached per scheduling signature, since the pods
        of a gang, and of many gangs, mostly share one."""
        sig = signature(pod)
        found = self._eligible.get(sig)
        if found is None:
            found = [n for n, info in self.nodes.items() if eligible(pod, info)]
            self._eligible[sig] = found
        return found

    def eligible_set(self, pod: PodInfo) -> frozenset[str]:
        sig = signature(pod)
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self.eligible_nodes(pod))
        return found

    def domains(self, pod: PodInfo, topology_key: str) -> dict[str, list[str]]:
        """The pod's eligible nodes by their value of the topology label."""
        key = (signature(pod), topology_key)
        found = self._domains.get(key)
        if found is None:
            found = {}
            for name in self.eligible_nodes(pod):
                value = self.nodes[name].labels.get(topology_key)
                if value is not None:
                    found.setdefault(value, []).append(name)
            self._domains[key] = found
        return found

    def _eligible_sets_by_sig(self, sig: tuple[Any, ...]) -> frozenset[str]:
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self._eligible[sig])
        return found

    def domain_free(self, pod: PodInfo, topology_key: str) -> dict[str, GpuEquivalents]:
        """Free GPUs per domain, over the pod's eligible nodes; kept current by `take`."""
        key = (signature(pod), topology_key)
        found = self._domain_free.get(key)
        if found is None:
            found = {name: self.free_gpus(nodes)
                     for name, nodes in self.domains(pod, topology_key).items()}
            self._domain_free[key] = found
        return found

    def need(self, pods: Iterable[PodInfo]) -> GpuEquivalents:
        """GPUs the pods request together."""
        return sum(self.gpus(p.requests) for p in pods)

    def free_gpus(self, names: Iterable[str]) -> GpuEquivalents:
        free_gpu = self.free_gpu
        return sum(max(free_gpu[n], 0) for n in names)
