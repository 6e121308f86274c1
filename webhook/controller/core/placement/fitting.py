"""Does a whole gang fit, and where? A pure function of the gang's pods and a snapshot.

Required topology: every pod inside one domain (nodes sharing the topology label's
value). Preferred: the best single domain, else across domains. Among domains that fit,
the tightest wins (least free GPUs), so big holes stay free for big gangs. Inside a
domain the pods are packed as `packing` packs them, slice by slice for a sliced gang.
A gang that fits nowhere is told why, and what room it would take first.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.capacity import EVERYWHERE
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.placement.packing import Plan, anywhere, arrange, usable
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.reasons import WaitReason


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


class _Asked(NamedTuple):
    """What the pods ask together: GPUs in all, each pod's (most first), and one pod of
    each `fit` (the last)."""

    need: GpuEquivalents
    sizes: Sequence[GpuEquivalents]
    distinct: Sequence[PodInfo]


def _asked(pods: Sequence[PodInfo], snap: Snapshot, gang: Gang | None) -> _Asked:
    """What the pods ask; of all of `gang`, kept with it: a round fits a hundred-pod
    gang that waits without counting its pods again."""
    if gang is not None and gang.whole(pods):
        return _Asked(gang.need(snap.accelerators), gang.sizes(snap.accelerators),
                      gang.distinct)
    gpus = snap.gpus
    return _Asked(snap.need(pods), sorted((gpus(p.requests) for p in pods), reverse=True),
                  tuple({p.fit: p for p in pods}.values()))


def _unholdable(distinct: Sequence[PodInfo], snap: Snapshot) -> NoFit | None:
    """A pod that no eligible node could hold even empty, counting every resource it
    requests: `cpu: 100000` fits nowhere however many GPUs are free."""
    nodes = snap.nodes
    for pod in distinct:
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


def _never(pods: Sequence[PodInfo], asked: _Asked, snap: Snapshot,
           topology_key: str | None, level: str) -> NoFit | None:
    """Why the gang could not fit even were its eligible nodes empty (in one domain of
    `topology_key` when given); None when it could."""
    if (unholdable := _unholdable(asked.distinct, snap)) is not None:
        return unholdable
    need, largest_pod = asked.need, asked.sizes[0]
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


def _nowhere(pods: Sequence[PodInfo], need: GpuEquivalents, snap: Snapshot,
             avoid: Collection[str]) -> NoFit | None:
    """Why the gang may use no node at all: none is eligible, or every one it may use is
    off limits; None when some node is left to it."""
    anchor = pods[0]
    eligible = snap.eligible_nodes(anchor)
    if not eligible:
        # Not a moment's want of room: no wait or eviction helps, so it reserves none.
        offering = "".join(f", has {d}" for d in anchor.constraints.devices)
        return NoFit(f"needs {need} GPUs, and no node is eligible: none is Ready, "
                     f"schedulable{offering}, tolerated and matched by the pods' node "
                     f"selection", code="NeverFits", never=True)
    if len(avoid) >= len(eligible) and snap.eligible_set(anchor) <= set(avoid):
        return NoFit(f"needs {need} GPUs; every node it may use is reserved for the first in "
                     f"the queue")
    return None


def _no_room(pods: Sequence[PodInfo], asked: _Asked, snap: Snapshot, level: str,
             avoid: Collection[str]) -> NoFit:
    """Why a gang without a topology does not fit now."""
    need = asked.need
    never = _never(pods, asked, snap, None, level)
    if never is not None:
        return never
    # Were it the head, it would reserve the nodes with the most free GPUs, one per pod:
    # the room closest to taking it, and no more, so pods behind go elsewhere.
    everywhere = usable(snap.eligible_nodes(pods[0]), avoid)
    closest = heapq.nlargest(len(pods), everywhere, key=snap.free_gpu.__getitem__)
    return NoFit(f"needs {need} GPUs on eligible nodes; {snap.free_gpus(everywhere)} free",
                 tuple(closest))


def _no_domain_room(pods: Sequence[PodInfo], asked: _Asked, snap: Snapshot,
                    topology_key: str, mode: str | None, level: str, avoid: Collection[str],
                    reserved: str | None) -> NoFit:
    """Why a gang with a topology fits in no domain now, and the domain it would take
    first: the one with the most free GPUs, or `reserved` while that could hold it."""
    anchor, need = pods[0], asked.need
    domains = snap.domains(anchor, topology_key)
    if not domains:
        return NoFit(f"needs {need} GPUs in one {level} domain, and no eligible node has the "
                     f"label {topology_key}", code="NoDomainFits")
    never = _never(pods, asked, snap, topology_key if mode == "required" else None, level)
    if never is not None:
        return never
    ranked = snap.ranked(anchor, topology_key)
    best_free = ranked[-1][0]
    best = ranked[bisect.bisect_left(ranked, (best_free, ""))][1]  # ties: the first by name
    if snap.capacities(anchor, topology_key)[0][0] < need:
        # Preferred, and more than any domain holds even empty: it will run across
        # domains. Nodes kept for it in one domain could never start it and would only
        # idle GPUs that backfill could use, so it keeps none; as the head it still keeps
        # its place (`best_domain`), first wherever its room frees. No room, not no
        # domain: moving pods out of one domain (`make_room`) could never make it fit.
        everywhere = usable(snap.eligible_nodes(anchor), avoid)
        return NoFit(f"needs {need} GPUs, more than one {level} domain holds, so it will "
                     f"run across domains; {snap.free_gpus(everywhere)} free on eligible "
                     f"nodes", code="NoRoom", best_domain=best)
    best_nodes = tuple(usable(domains[best], avoid)) if best_free > 0 else ()
    nodes = snap.nodes
    if reserved is not None and reserved in domains and reserved != best and \
            sum(snap.gpus(nodes[n].allocatable) for n in domains[reserved]) >= need:
        best, best_nodes = reserved, tuple(usable(domains[reserved], avoid))
    return NoFit(f"needs {need} GPUs in one {level} domain, the best has {best_free} free",
                 best_nodes, code="NoDomainFits", best_domain=best)


def fit(pods: Sequence[PodInfo], snap: Snapshot, topology_key: str | None,
        mode: str | None, level: str = "topology", avoid: Collection[str] = (),
        reserved: str | None = None, gang: Gang | None = None) -> Plan | NoFit:
    """A plan for the whole gang, or the reason it does not fit. `avoid` holds nodes off
    limits (reserved for the head of the queue, held for a preemptor). A gang that does
    not fit would take first the domain with the most free GPUs, or `reserved`, the one
    reserved for it before, while that could hold it: a head whose reservation moved to
    wherever happened to have most free would never see one drain. `pods` may be all of
    `gang`, whose counts are kept with it."""
    asked = _asked(pods, snap, gang)
    need, sizes = asked.need, asked.sizes
    nowhere = _nowhere(pods, need, snap, avoid)
    if nowhere is not None:
        return nowhere
    anchor = pods[0]
    # Packing looks at every eligible node: first, in a look at the few amounts free,
    # could the pods pack at all? In a full cluster mostly not.
    packs = snap.domain_rooms(anchor, EVERYWHERE)[EVERYWHERE].could_pack(sizes)
    if not topology_key:
        arranged = anywhere(pods, snap, avoid) if packs else None
        return Plan(None, *arranged) if arranged is not None else \
            _no_room(pods, asked, snap, level, avoid)
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
        arranged = arrange(pods, usable(domains[name], avoid), snap)
        if arranged is not None:
            return Plan(name, *arranged)
    arranged = anywhere(pods, snap, avoid) if mode != "required" and packs else None
    if arranged is not None:
        return Plan(None, *arranged)
    return _no_domain_room(pods, asked, snap, topology_key, mode, level, avoid, reserved)
