"""Where pods go among given nodes, and the plan that says so. Best fit: the pods go
largest first, each on the fullest node that still takes it, so big holes stay free for
big pods. A sliced gang (`slice_key`, `slice_size` in its marks) goes slice by slice,
each inside one domain of the slice level: the largest slice first, into the tightest
slice domain that takes it."""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.snapshot import FreeIndex, Snapshot, fits, with_pod_slot
from webhook.controller.core.identities import PodKey
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.resources import Resources

# Each pod's node, and for a sliced gang each pod's domain of the slice level.
Arranged = tuple[dict[PodKey, str], dict[PodKey, str]]


@dataclass(frozen=True, slots=True)
class Plan:
    domain: str | None
    assignments: dict[PodKey, str]
    # A sliced gang: each member's domain of the slice level.
    slices: dict[PodKey, str] = field(default_factory=dict)

    def nominations(self) -> tuple[tuple[str, str], ...]:
        """(pod name, node) of every pod placed, in name order."""
        return tuple(sorted((key.name, node) for key, node in self.assignments.items()))


def pack(pods: Sequence[PodInfo], candidates: Sequence[str], snap: Snapshot,
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
    anchor = pods[0].marks
    size = anchor.slice_size
    if not anchor.slice_key or not size:
        return None
    if all(p.marks.slice_index is not None for p in pods):
        by_index: dict[int | None, list[PodInfo]] = {}
        for pod in pods:
            by_index.setdefault(pod.marks.slice_index, []).append(pod)
        return [group for _, group in sorted(by_index.items(), key=lambda kv: kv[0] or 0)]
    ordered = sorted(pods, key=lambda p: p.name)
    return [ordered[i:i + size] for i in range(0, len(ordered), size)]


def _free_in(nodes: Sequence[str], snap: Snapshot, local: Mapping[str, Resources]
             ) -> GpuEquivalents:
    return sum(max(snap.gpus(local[n]) if n in local else snap.free_gpu[n], 0) for n in nodes)


def _pack_slices(groups: Sequence[Sequence[PodInfo]], candidates: Sequence[str],
                 snap: Snapshot) -> Arranged | None:
    """Every slice inside one domain of the slice level among `candidates`: the largest
    slice first, each into the tightest slice domain that takes it; or None."""
    anchor = groups[0][0]
    key = anchor.marks.slice_key
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
            got = pack(group, domains[name], snap, trial)
            if got is not None:
                local = trial
                placed.update(got)
                slices.update(dict.fromkeys(got, name))
                break
        else:
            return None
    return placed, slices


def arrange(pods: Sequence[PodInfo], candidates: Sequence[str], snap: Snapshot
            ) -> Arranged | None:
    """The pods on `candidates`, slice by slice for a sliced gang; or None."""
    groups = slice_groups(pods)
    if groups is not None:
        return _pack_slices(groups, candidates, snap)
    placed = pack(pods, candidates, snap)
    return None if placed is None else (placed, {})


def anywhere(pods: Sequence[PodInfo], snap: Snapshot, avoid: Collection[str]
             ) -> Arranged | None:
    """The pods on any of the anchor's eligible nodes but those to `avoid`, as
    `arrange`: the snapshot's own index of those nodes spares a pass over all of them
    for each gang (a cluster's thousands, for every single pod that waits)."""
    if slice_groups(pods) is not None:
        return arrange(pods, usable(snap.eligible_nodes(pods[0]), avoid), snap)
    placed = _best_fit(pods, snap.free_index(pods[0]), snap, {}, avoid)
    return None if placed is None else (placed, {})


def usable(nodes: Sequence[str], avoid: Collection[str]) -> Sequence[str]:
    return [n for n in nodes if n not in avoid] if avoid else nodes


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
        placed = pack(pods, candidates, snap)
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
        got = pack(group, nodes, snap, local)
        if got is None:
            return None
        assignments.update(got)
        if name is not None:
            pinned.update(dict.fromkeys(got, name))
    return Plan(None, assignments, pinned)
