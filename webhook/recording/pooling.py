"""A live cluster's node pools, from its nodes as the API lists them, for
`airlock simulate --cluster-from`: nodes alike (the same GPU product, GPUs each, and the
same place in NVLink topology or none) make one pool, in the form `--cluster` reads.

What the nodes say is their own: a domain's size is the most nodes any of the pool's
NVLink cliques (GPU feature discovery's `nvidia.com/gpu.clique`) holds, and the domains of
a block the most of them any block (GKE's topology block) holds. Nodes of no GPUs are no
pool's."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webhook.controller.core.nodes import NodeInfo
from webhook.pools import (
    BLOCK_LABEL,
    CLIQUE_LABEL,
    PRODUCT_LABEL,
    Pool,
    PoolError,
    family,
    model_name,
    validated,
)

# GKE names its accelerators by this label, where GPU feature discovery does not run.
GKE_ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
_UNKNOWN = "unknown-gpu"
_NAME_MAX = 34  # room for a `-<n>` that keeps two pools' names apart


@dataclass(slots=True)
class _Group:
    product: str
    gpus: int
    labels: dict[str, str]
    cliques: dict[str, int] = field(default_factory=dict)
    blocks: dict[str, set[str]] = field(default_factory=dict)
    count: int = 0


def _product(labels: Mapping[str, str]) -> str:
    return labels.get(PRODUCT_LABEL) or labels.get(GKE_ACCELERATOR_LABEL) or _UNKNOWN


def _whole(value: int | float | object) -> int:
    return int(value) if isinstance(value, int | float) and value >= 1 else 0


def _nvlink(product: str) -> bool:
    """Whether the product's cliques are NVLink domains: a model the catalogue knows has
    NVLink or not whatever a node says (a clique label on an L4 links nothing)."""
    known = family(product)
    return known is None or known.nvlink


def _name(product: str, taken: set[str]) -> str:
    base = model_name(product)[:_NAME_MAX].strip("-") or "gpu"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add(name)
    return name


def _groups(nodes: Iterable[NodeInfo], resource: str = "nvidia.com/gpu") -> list[_Group]:
    groups: dict[tuple[str, int, bool, tuple[tuple[str, str], ...]], _Group] = {}
    for node in nodes:
        gpus = _whole(node.allocatable.get(resource, 0))
        if not gpus:
            continue
        labels = node.labels
        kept = {k: v for k, v in labels.items() if k == GKE_ACCELERATOR_LABEL}
        clique = labels.get(CLIQUE_LABEL)
        key = (_product(labels), gpus, clique is not None, tuple(sorted(kept.items())))
        found = groups.setdefault(key, _Group(key[0], gpus, kept))
        found.count += 1
        if clique is not None:
            found.cliques[clique] = found.cliques.get(clique, 0) + 1
            found.blocks.setdefault(labels.get(BLOCK_LABEL, f"-{clique}"), set()).add(clique)
    return sorted(groups.values(), key=lambda g: (g.product, g.gpus, bool(g.cliques)))


def pools_of_nodes(nodes: Iterable[NodeInfo], source: str,
                   resource: str = "nvidia.com/gpu") -> tuple[Pool, ...]:
    """The nodes' pools; PoolError naming `source` for a cluster that makes none (no node
    with GPUs) or nodes a pool cannot describe."""
    groups = _groups(nodes, resource)
    if not groups:
        raise PoolError(f"{source}: no node has allocatable {resource}: no pool to simulate")
    taken: set[str] = set()
    raw = [{"name": _name(g.product, taken), "product": g.product, "count": g.count,
            "gpusPerNode": g.gpus,
            "nodesPerDomain": max(g.cliques.values()) if g.cliques and _nvlink(g.product)
            else None,
            "domainsPerBlock": max((len(c) for c in g.blocks.values()), default=1),
            "labels": g.labels}
           for g in groups]
    return validated({"pools": raw}, source)
