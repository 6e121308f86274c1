"""Where the joiners of a gang that already runs go: where the gang runs. Replacements and
late joiners of a sliced gang go into their slice's domain; a gang that only prefers one
domain (and has no slices) takes them elsewhere when its own is full, as it could have
spanned domains at its admission. Pure."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.placement.fitting import NoFit, fit
from webhook.controller.core.placement.packing import Plan, place_in
from webhook.controller.core.pods import PodInfo


def domain_nodes(snap: Snapshot, pod: PodInfo, key: str | None,
                 domain: str | None) -> list[str]:
    """The pod's eligible nodes in `domain` of `key`; all of them without a domain."""
    if domain is None or key is None:
        return snap.eligible_nodes(pod)
    return snap.domains(pod, key).get(domain, [])


def _joiner_slices(gang: Gang, pods: Sequence[PodInfo]) -> dict[str, str]:
    """Joiners of a sliced gang, by name, to the slice domain where their slice's other
    members were placed (known by the slice index the webhook recorded)."""
    placed = {name: domain for r in gang.records for name, domain in r.slices}
    if not placed:
        return {}
    where = {p.marks.slice_index: placed[p.name] for p in gang.members
             if p.name in placed and p.marks.slice_index is not None}
    return {p.name: where[p.marks.slice_index] for p in pods if p.marks.slice_index in where}


def fit_joiners(gang: Gang, pods: Sequence[PodInfo], snap: Snapshot, avoid: Collection[str]
                ) -> tuple[Plan | NoFit, str | None]:
    """Where the joiners go, or why they cannot yet; and the topology key of the domain
    they must use (None where they may go anywhere)."""
    key, domain = gang.home()
    anchor = pods[0]
    if key is None or domain is None:
        return fit(pods, snap, anchor.marks.topology_key, anchor.marks.topology_mode,
                   level=anchor.marks.topology_key or "topology", avoid=avoid), None
    nodes = [n for n in domain_nodes(snap, anchor, key, domain) if n not in avoid]
    placed = place_in(pods, snap, nodes, anchor.marks.slice_key, _joiner_slices(gang, pods))
    if placed is not None:
        return Plan(domain, placed.assignments, placed.slices), key
    if anchor.marks.topology_mode == "preferred" and not anchor.marks.slice_key:
        anywhere = [n for n in snap.eligible_nodes(anchor) if n not in avoid]
        placed = place_in(pods, snap, anywhere)
        if placed is not None:
            return Plan(None, placed.assignments), None
    need = snap.need(pods)
    return NoFit(f"needs {need} GPUs in {key} domain {domain}, where the gang runs; it has "
                 f"{snap.free_gpus(nodes)} free", tuple(nodes)), key
