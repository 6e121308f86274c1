"""Does a whole gang fit, and where? A pure function of the gang's pods and a snapshot.

Required topology: every pod inside one domain (nodes sharing the topology label's
value). Preferred: the best single domain, else across domains. Among domains that fit,
the tightest wins (least free GPUs), so big holes stay free for big gangs. Inside a
domain, pods are placed largest first, each on the fullest node that still takes it.

A sliced gang (`slice_key`, `slice_size` on its pods) also needs each slice inside one
domain of the slice level, within the gang's domain: slices go largest first, each into
the tightest slice domain that takes it.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.capacity import EVERYWHERE
from webhook.controller.core.cluster.snapshot import FreeIndex, Snapshot, fits, with_pod_slot
from webhook.controller.core.identities import PodKey
from webhook.controller.core.objects import PodInfo, Resources
from webhook.controller.core.reasons import WaitReason


@dataclass(frozen=True, slots=True)
class Plan:
    domain: str | None
    assignments: dict[PodKey, str]
    # A sliced gang: each member's domain of the slice level.
    slices: dict[PodKey, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class NoFit:
    reason: str
    # The domain the gang would take first once capacity frees up (for backfill).
    best_domain_nodes: tuple[str, ...] = ()
    # More than the eligible nodes hold even empty: no wait and no preemption helps.
    never: bool = False
    # What kind of no: no room on the nodes, none in one domain, or never any.
    code: WaitReason = "NoRoom"
    # The name of that domain, when the gang has a topology.
    best_domain: str | None = None


def _unholdable(pods: Sequence[PodInfo], snap: Snapshot) -> NoFit | None:
    """A pod that no eligible node could hold even empty, counting every resource it
    requests: `cpu: 100000` fits nowhere however many GPUs are free."""
    nodes = snap.nodes
    for pod in {p.fit: p for p in pods}.values():
        if snap.could_hold(pod):
            continue
        eligible = snap.eligible_nodes(pod)
        asked = [k for k in sorted(pod.requests) if pod.requests[k] > 0]
        most = {k: max((nodes[n].allocatable.get(k, 0) for n in eligible), default=0)
                for k in asked}
        over = [f"{k} {pod.requests[k]} (the most any has: {most[k]})" for k in asked
                if pod.requests[k] > most[k]]
        what = ", ".join(over) if over else "all it requests at once"
        return NoFit(f"pod {pod.name} requests more than any eligible node offers: {what}; "
                     f"it cannot fit until the cluster has such a node", code="NeverFits",
                     never=True)
    return None


def _never(pods: Sequence[PodInfo], need: GpuEquivalents, snap: Snapshot,
           topology_key: str | None, level: str) -> NoFit | None:
    """Why the gang could not fit even were its eligible nodes empty (in one domain of
    `topology_key` when given); None when it could."""
    if (unholdable := _unholdable(pods, snap)) is not None:
        return unholdable
    largest_pod = max(snap.gpus(p.requests) for p in pods)
    capacities = snap.capacities(pods[0], topology_key)  # most GPUs first
    for total, largest in capacities:
        if total < need:
            break
        if largest >= largest_pod:
            return None
    most = capacities[0][0] if capacities else 0
    if topology_key is None:
        where = (f"more than all eligible nodes have ({most})" if need > most else
                 f"and one pod needs {largest_pod}, more than any eligible node has")
        return NoFit(f"needs {need} GPUs, {where}; it cannot fit until the cluster grows",
                     code="NeverFits", never=True)
    where = (f"more than the largest has ({most})" if need > most else
             f"and one pod needs {largest_pod}, more than any node of a domain that large")
    return NoFit(f"needs {need} GPUs in one {level} domain, {where}; it cannot fit until the "
                 f"cluster grows", code="NeverFits", never=True)


def _pack(pods: Sequence[PodInfo], candidates: Sequence[str], snap: Snapshot,
          local: dict[str, Resources] | None = None) -> dict[PodKey, str] | None:
    """Place every pod on one of `candidates`, or None. Tentative: the snapshot is left
    as it was; what the pods take is written in `local` (free capacity of the nodes
    taken from, over the snapshot's), so slices placed one after the other see each
    other."""
    return _best_fit(pods, FreeIndex(list(candidates), snap.free_gpu), snap,
                     {} if local is None else local)


def _best_fit(pods: Sequence[PodInfo], index: FreeIndex, snap: Snapshot,
              local: dict[str, Resources], avoid: Collection[str] = ()
              ) -> dict[PodKey, str] | None:
    """Best fit: each pod (largest first) goes to the fullest node of `index` (but those
    to `avoid`) that still takes it, GPUs deciding first, the first in the index's order
    among equals. A pod looks at the fullest amounts that could take it, not at every
    node: a gang of hundreds of pods on thousands of nodes stays cheap. The index is left
    as it was: nodes taken from in this packing are in `local`, and weighed from there."""
    placed: dict[PodKey, str] = {}
    gpus, nodes, position = snap.gpus, index.nodes, index.position
    for pod in sorted(pods, key=lambda p: (-gpus(p.requests), -p.requests.get("cpu", 0))):
        need = with_pod_slot(pod.requests)
        need_gpu = gpus(pod.requests)
        allowed = snap.eligible_set(pod)
        best: tuple[GpuEquivalents, int] | None = None
        for level in index.levels[bisect.bisect_left(index.levels, need_gpu):]:
            for at in index.buckets[level]:
                node = nodes[at]
                if node not in local and node in allowed and node not in avoid and \
                        fits(snap.free[node], need):
                    best = level, at
                    break
            if best is not None:
                break
        for node, free in local.items():
            at = position.get(node, -1)
            if at < 0 or node in avoid or node not in allowed:
                continue
            left = gpus(free)
            if left >= need_gpu and (best is None or (left, at) < best) and fits(free, need):
                best = left, at
        if best is None:
            return None
        node = nodes[best[1]]
        placed[pod.key] = node
        current = local.get(node, snap.free[node])
        local[node] = {k: current.get(k, 0) - need.get(k, 0) for k in current.keys() | need}
    return placed


def slice_groups(pods: Sequence[PodInfo]) -> list[list[PodInfo]] | None:
    """A sliced gang's pods by slice: by the index the webhook recorded when every pod
    has one, else slice-size at a time in name order (any grouping is as good when the
    operator numbers nothing); None for a gang without slices."""
    anchor = pods[0]
    size = anchor.slice_size
    if not anchor.slice_key or not size:
        return None
    if all(p.slice_index is not None for p in pods):
        by_index: dict[int | None, list[PodInfo]] = {}
        for pod in pods:
            by_index.setdefault(pod.slice_index, []).append(pod)
        return [group for _, group in sorted(by_index.items(), key=lambda kv: kv[0] or 0)]
    ordered = sorted(pods, key=lambda p: p.name)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def _free_in(nodes: Sequence[str], snap: Snapshot, local: Mapping[str, Resources]
             ) -> GpuEquivalents:
    return sum(max(snap.gpus(local[n]) if n in local else snap.free_gpu[n], 0) for n in nodes)


def _pack_slices(groups: Sequence[Sequence[PodInfo]], candidates: Sequence[str],
                 snap: Snapshot) -> tuple[dict[PodKey, str], dict[PodKey, str]] | None:
    """Every slice inside one domain of the slice level among `candidates`: the largest
    slice first, each into the tightest slice domain that takes it; (assignments, each
    pod's slice domain), or None."""
    anchor = groups[0][0]
    key = anchor.slice_key
    assert key is not None
    here = set(candidates)
    domains = {name: inside for name, nodes in snap.domains(anchor, key).items()
               if (inside := [n for n in nodes if n in here])}
    local: dict[str, Resources] = {}
    placed: dict[PodKey, str] = {}
    slices: dict[PodKey, str] = {}
    for group in sorted(groups, key=lambda g: -snap.need(g)):
        need = snap.need(group)
        for free, name in sorted((_free_in(nodes, snap, local), name)
                                 for name, nodes in domains.items()):
            if free < need:
                continue
            trial = dict(local)
            got = _pack(group, domains[name], snap, trial)
            if got is not None:
                local = trial
                placed.update(got)
                slices.update(dict.fromkeys(got, name))
                break
        else:
            return None
    return placed, slices


def _arrange(pods: Sequence[PodInfo], candidates: Sequence[str], snap: Snapshot
             ) -> tuple[dict[PodKey, str], dict[PodKey, str]] | None:
    """The pods on `candidates`, slice by slice for a sliced gang: (assignments, slice
    domains), or None."""
    groups = slice_groups(pods)
    if groups is not None:
        return _pack_slices(groups, candidates, snap)
    placed = _pack(pods, candidates, snap)
    return None if placed is None else (placed, {})


def _anywhere(pods: Sequence[PodInfo], snap: Snapshot, avoid: Collection[str]
              ) -> tuple[dict[PodKey, str], dict[PodKey, str]] | None:
    """The pods on any of the anchor's eligible nodes but those to `avoid`, as
    `_arrange`: the snapshot's own index of those nodes spares a pass over all of them
    for each gang (a cluster's thousands, for every single pod that waits)."""
    if slice_groups(pods) is not None:
        return _arrange(pods, _usable(snap.eligible_nodes(pods[0]), avoid), snap)
    placed = _best_fit(pods, snap.free_index(pods[0]), snap, {}, avoid)
    return None if placed is None else (placed, {})


def _usable(nodes: Sequence[str], avoid: Collection[str]) -> Sequence[str]:
    return [n for n in nodes if n not in avoid] if avoid else nodes


def fit(pods: Sequence[PodInfo], snap: Snapshot, topology_key: str | None,
        mode: str | None, level: str = "topology", avoid: Collection[str] = (),
        reserved: str | None = None) -> Plan | NoFit:
    """A plan for the whole gang, or the reason it does not fit. `avoid` holds nodes off
    limits (reserved for the head of the queue, held for a preemptor). A gang that does
    not fit would take first the domain with the most free GPUs, or `reserved`, the one
    reserved for it before, while that could hold it: a head whose reservation moved to
    wherever happened to have most free would never see one drain."""
    need = snap.need(pods)
    anchor = pods[0]
    eligible = snap.eligible_nodes(anchor)
    if not eligible:
        # Not a moment's want of room: no wait or eviction helps, so it reserves none.
        offering = "".join(f", has {d}" for d in anchor.devices)
        return NoFit(f"needs {need} GPUs, and no node is eligible: none is Ready, "
                     f"schedulable{offering}, tolerated and matched by the pods' node "
                     f"selection", code="NeverFits", never=True)
    if len(avoid) >= len(eligible) and snap.eligible_set(anchor) <= set(avoid):
        return NoFit(f"needs {need} GPUs; every node it may use is reserved for the first in "
                     f"the queue")
    sizes = sorted((snap.gpus(p.requests) for p in pods), reverse=True)
    # Packing looks at every eligible node: first, in a look at the few amounts free,
    # could the pods pack at all? In a full cluster mostly not.
    anywhere = snap.domain_rooms(anchor, EVERYWHERE)[EVERYWHERE].could_pack(sizes)
    if not topology_key:
        arranged = _anywhere(pods, snap, avoid) if anywhere else None
        if arranged is not None:
            return Plan(None, *arranged)
        # Were it the head, it would reserve the nodes with the most free GPUs, one per pod:
        # the room closest to taking it, and no more, so pods behind go elsewhere.
        free_gpu, everywhere = snap.free_gpu, _usable(eligible, avoid)
        closest = heapq.nlargest(len(pods), everywhere, key=free_gpu.__getitem__)
        return _never(pods, need, snap, None, level) or NoFit(
            f"needs {need} GPUs on eligible nodes; {snap.free_gpus(everywhere)} free",
            tuple(closest))
    domains = snap.domains(anchor, topology_key)
    # Tightest first; a gang in a busy cluster mostly fits nowhere, and then only the
    # domain with the most free GPUs is looked at closer.
    ranked = snap.ranked(anchor, topology_key)
    rooms = snap.domain_rooms(anchor, topology_key)
    for _, name in ranked[bisect.bisect_left(ranked, (need, "")):]:
        # Enough GPUs in all is not enough: a fragmented domain is passed over at a look
        # at its few amounts free, not a packing over its nodes.
        if not rooms[name].could_pack(sizes):
            continue
        arranged = _arrange(pods, _usable(domains[name], avoid), snap)
        if arranged is not None:
            return Plan(name, *arranged)
    if mode != "required" and anywhere:
        arranged = _anywhere(pods, snap, avoid)
        if arranged is not None:
            return Plan(None, *arranged)
    if not domains:
        return NoFit(f"needs {need} GPUs in one {level} domain, and no eligible node has the "
                     f"label {topology_key}", code="NoDomainFits")
    never = _never(pods, need, snap, topology_key if mode == "required" else None, level)
    if never is not None:
        return never
    best_free = ranked[-1][0]
    best = ranked[bisect.bisect_left(ranked, (best_free, ""))][1]  # ties: the first by name
    best_nodes = tuple(_usable(domains[best], avoid)) if best_free > 0 else ()
    nodes = snap.nodes
    if reserved is not None and reserved in domains and reserved != best and \
            sum(snap.gpus(nodes[n].allocatable) for n in domains[reserved]) >= need:
        best, best_nodes = reserved, tuple(_usable(domains[reserved], avoid))
    return NoFit(f"needs {need} GPUs in one {level} domain, the best has {best_free} free",
                 best_nodes, code="NoDomainFits", best_domain=best)


def take_plan(plan: Plan, pods: Sequence[PodInfo], snap: Snapshot) -> None:
    """What the plan's pods request, taken on their nodes in the snapshot."""
    by_key = {p.key: p for p in pods}
    for key, node in plan.assignments.items():
        snap.take(node, with_pod_slot(by_key[key].requests))


def place_in(pods: Sequence[PodInfo], snap: Snapshot, candidates: Sequence[str],
             slice_key: str | None = None, slices: Mapping[str, str] | None = None
             ) -> Plan | None:
    """Where already-promised pods go among `candidates` (their recorded domain), to
    hold their capacity in the snapshot; None when they no longer fit there. A pod that
    `slices` names (pod name -> domain of `slice_key`) goes inside that slice domain."""
    if not slice_key or not slices:
        placed = _pack(pods, candidates, snap)
        return None if placed is None else Plan(None, placed)
    by_slice: dict[str | None, list[PodInfo]] = {}
    for pod in pods:
        by_slice.setdefault(slices.get(pod.name), []).append(pod)
    domains = snap.domains(pods[0], slice_key)
    here = set(candidates)
    local: dict[str, Resources] = {}
    assignments: dict[PodKey, str] = {}
    pinned: dict[PodKey, str] = {}
    for name, group in by_slice.items():
        nodes = candidates if name is None else [n for n in domains.get(name, ()) if n in here]
        got = _pack(group, nodes, snap, local)
        if got is None:
            return None
        assignments.update(got)
        if name is not None:
            pinned.update(dict.fromkeys(got, name))
    return Plan(None, assignments, pinned)
