"""Does a whole gang fit, and where? A pure function of the gang's pods and a snapshot.

Required topology: every pod inside one domain (nodes sharing the topology label's
value). Preferred: the best single domain, else across domains. Among domains that fit,
the tightest wins (least free GPUs), so big holes stay free for big gangs. Inside a
domain, pods are placed largest first, each on the fullest node that still takes it.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.controller.objects import PodInfo, Resources
from webhook.controller.snapshot import Snapshot, fits, with_pod_slot


@dataclass(frozen=True, slots=True)
class Plan:
    domain: str | None
    assignments: dict[tuple[str, str], str]


@dataclass(frozen=True, slots=True)
class NoFit:
    reason: str
    # The domain the gang would take first once capacity frees up (for backfill).
    best_domain_nodes: tuple[str, ...] = ()


def _pack(pods: Sequence[PodInfo], candidates: Sequence[str], snap: Snapshot
          ) -> dict[tuple[str, str], str] | None:
    """Place every pod on one of `candidates`, or None. Tentative: the snapshot is left
    as it was.

    Best fit: each pod (largest first) goes to the fullest node that still takes it,
    GPUs deciding first, the first in candidate order among equals. The candidates are
    bucketed by free GPUs once, so a pod looks at the fullest buckets that could take it,
    not at every node: a gang of hundreds of pods on thousands of nodes stays cheap."""
    local: dict[str, Resources] = {}
    placed: dict[tuple[str, str], str] = {}
    gpus, free_gpu = snap.gpus, snap.free_gpu
    # Free GPUs -> candidate positions, ascending (candidate order).
    buckets: dict[GpuEquivalents, list[int]] = {}
    for position, node in enumerate(candidates):
        buckets.setdefault(free_gpu[node], []).append(position)
    levels = sorted(buckets)
    for pod in sorted(pods, key=lambda p: (-gpus(p.requests), -p.requests.get("cpu", 0))):
        need = with_pod_slot(pod.requests)
        need_gpu = gpus(pod.requests)
        allowed = snap.eligible_set(pod)
        best: int | None = None
        for level in levels[bisect.bisect_left(levels, need_gpu):]:
            for position in buckets[level]:
                node = candidates[position]
                if node in allowed and fits(local.get(node, snap.free[node]), need):
                    best = position
                    break
            if best is not None:
                break
        if best is None:
            return None
        node = candidates[best]
        placed[pod.key] = node
        mine = local.get(node)
        before = free_gpu[node] if mine is None else gpus(mine)
        current = snap.free[node] if mine is None else mine
        after = local[node] = {k: current.get(k, 0) - need.get(k, 0)
                               for k in current.keys() | need}
        left = gpus(after)
        buckets[before].remove(best)
        if left not in buckets:
            buckets[left] = []
            bisect.insort(levels, left)
        bisect.insort(buckets[left], best)
    return placed


def fit(pods: Sequence[PodInfo], snap: Snapshot, topology_key: str | None,
        mode: str | None, level: str = "topology", avoid: Collection[str] = ()) -> Plan | NoFit:
    """A plan for the whole gang, or the reason it does not fit. `avoid` holds nodes kept
    for a gang ahead in the queue."""
    need = snap.need(pods)
    anchor = pods[0]
    eligible = snap.eligible_nodes(anchor)
    everywhere = [n for n in eligible if n not in avoid]
    if eligible and not everywhere:
        return NoFit(f"needs {need} GPUs; every node it may use is kept for the first in "
                     f"the queue")
    if not everywhere:
        offering = "".join(f", has {d}" for d in anchor.devices)
        return NoFit(f"needs {need} GPUs, and no node is eligible: none is Ready, "
                     f"schedulable{offering}, tolerated and matched by the pods' node "
                     f"selection")
    if not topology_key:
        placed = _pack(pods, everywhere, snap)
        if placed is not None:
            return Plan(None, placed)
        return NoFit(f"needs {need} GPUs on eligible nodes; {snap.free_gpus(everywhere)} free",
                     tuple(everywhere))
    domains = snap.domains(anchor, topology_key)
    ranked = sorted((free, name) for name, free in
                    snap.domain_free(anchor, topology_key).items())
    best_free: GpuEquivalents = 0
    best_nodes: tuple[str, ...] = ()
    for free, name in ranked:
        nodes = domains[name]
        usable = [n for n in nodes if n not in avoid]
        if free > best_free:
            best_free, best_nodes = free, tuple(usable)
        if free < need:
            continue
        placed = _pack(pods, usable, snap)
        if placed is not None:
            return Plan(name, placed)
    if mode != "required":
        placed = _pack(pods, everywhere, snap)
        if placed is not None:
            return Plan(None, placed)
    return NoFit(f"needs {need} GPUs in one {level} domain, the best has {best_free} free"
                 if domains else
                 f"needs {need} GPUs in one {level} domain, and no eligible node has the "
                 f"label {topology_key}", best_nodes)


def could_ever_fit(pods: Sequence[PodInfo], snap: Snapshot, topology_key: str | None,
                   mode: str | None) -> bool:
    """Whether the pods would fit were their eligible nodes empty (in one domain, where
    the topology is required), counting GPUs alone: a necessary condition, cheap next to
    a fit. A gang that never could is no head of the queue: it would keep room for ever."""
    anchor = pods[0]
    sizes = [snap.gpus(p.requests) for p in pods]
    need, largest = sum(sizes), max(sizes)
    groups: Iterable[list[str]] = (snap.domains(anchor, topology_key).values()
                                   if topology_key and mode == "required"
                                   else [snap.eligible_nodes(anchor)])
    for nodes in groups:
        capacity = [snap.gpus(snap.nodes[n].allocatable) for n in nodes]
        if capacity and sum(capacity) >= need and max(capacity) >= largest:
            return True
    return False


def reserve(plan: Plan, pods: Sequence[PodInfo], snap: Snapshot) -> None:
    by_key = {p.key: p for p in pods}
    for key, node in plan.assignments.items():
        snap.take(node, with_pod_slot(by_key[key].requests))


def place_in(pods: Sequence[PodInfo], snap: Snapshot, candidates: Sequence[str]
             ) -> Plan | None:
    """Where already-promised pods go among `candidates` (their recorded domain), to
    hold their capacity in the snapshot; None when they no longer fit there."""
    placed = _pack(pods, candidates, snap)
    return None if placed is None else Plan(None, placed)
