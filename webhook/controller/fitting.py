"""Does a whole gang fit, and where? A pure function of the gang's pods and a snapshot.

Required topology: every pod inside one domain (nodes sharing the topology label's
value). Preferred: the best single domain, else across domains. Among domains that fit,
the tightest wins (least free GPUs), so big holes stay free for big gangs. Inside a
domain, pods are placed largest first, each on the fullest node that still takes it.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence
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
    # More than the eligible nodes hold even empty: no wait and no preemption helps.
    never: bool = False


def _never(need: GpuEquivalents, anchor: PodInfo, snap: Snapshot, topology_key: str | None,
           level: str) -> NoFit | None:
    """Why the gang can never fit on the nodes eligible now, or None."""
    if topology_key is None:
        (held,) = snap.cluster.capacities(anchor, None).values()
        if need > held:
            return NoFit(f"needs {need} GPUs, more than all eligible nodes have ({held}); it "
                         f"cannot fit until the cluster grows", never=True)
        return None
    largest = max(snap.cluster.capacities(anchor, topology_key).values(), default=0)
    if need > largest:
        return NoFit(f"needs {need} GPUs in one {level} domain, more than the largest has "
                     f"({largest}); it cannot fit until the cluster grows", never=True)
    return None


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


def _usable(nodes: Sequence[str], avoid: Collection[str]) -> Sequence[str]:
    return [n for n in nodes if n not in avoid] if avoid else nodes


def fit(pods: Sequence[PodInfo], snap: Snapshot, topology_key: str | None,
        mode: str | None, level: str = "topology", avoid: Collection[str] = ()) -> Plan | NoFit:
    """A plan for the whole gang, or the reason it does not fit. `avoid` holds nodes kept
    for a gang ahead in the queue."""
    need = snap.need(pods)
    anchor = pods[0]
    eligible = snap.eligible_nodes(anchor)
    if not eligible or (len(avoid) >= len(eligible) and snap.eligible_set(anchor) <= set(avoid)):
        offering = "".join(f", has {d}" for d in anchor.devices)
        return NoFit(f"needs {need} GPUs, and no node is eligible: none is Ready, "
                     f"schedulable{offering}, tolerated and matched by the pods' node "
                     f"selection")
    if not topology_key:
        everywhere = _usable(eligible, avoid)
        placed = _pack(pods, everywhere, snap)
        if placed is not None:
            return Plan(None, placed)
        return _never(need, anchor, snap, None, level) or NoFit(
            f"needs {need} GPUs on eligible nodes; {snap.free_gpus(everywhere)} free",
            tuple(everywhere))
    domains = snap.domains(anchor, topology_key)
    # Tightest first; a gang in a busy cluster mostly fits nowhere, and then only the
    # domain with the most free GPUs is looked at closer.
    ranked = sorted((free, name) for name, free in
                    snap.domain_free(anchor, topology_key).items())
    for _, name in ranked[bisect.bisect_left(ranked, (need, "")):]:
        placed = _pack(pods, _usable(domains[name], avoid), snap)
        if placed is not None:
            return Plan(name, placed)
    if mode != "required":
        placed = _pack(pods, _usable(eligible, avoid), snap)
        if placed is not None:
            return Plan(None, placed)
    if not domains:
        return NoFit(f"needs {need} GPUs in one {level} domain, and no eligible node has the "
                     f"label {topology_key}")
    never = _never(need, anchor, snap, topology_key if mode == "required" else None, level)
    if never is not None:
        return never
    best_free = ranked[-1][0]
    best = ranked[bisect.bisect_left(ranked, (best_free, ""))][1]  # ties: the first by name
    best_nodes = tuple(_usable(domains[best], avoid)) if best_free > 0 else ()
    return NoFit(f"needs {need} GPUs in one {level} domain, the best has {best_free} free",
                 best_nodes)


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
