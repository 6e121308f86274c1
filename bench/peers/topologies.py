"""Whether a gang's pods kept the topology its job requires (pure: placements in, what
broke out). A job's `requiredTopology` puts all its pods in one domain of that level, and
`sliceTopology` each `sliceSize` of them in one domain of the slice's level. The replay's
pods are bare, with no rank, and not every system is told which pod is in which slice
(Kueue is told sizes only), so slices are judged by count: once all the job's pods are
bound, each domain of the slice's level holds whole slices. The replay judges the pods
of one attempt bound at the same time: a pod gone (preempted, done) no longer counts, so
an attempt given up and its pods bound later are judged apart.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

from webhook.sandbox.nodes import Shape, topology
from webhook.simulation.traces import Job

# node name -> its labels; a topology level's name -> its node label (the policy's).
NodeLabels = Mapping[str, Mapping[str, str]]
Levels = Mapping[str, str]


def node_labels(shape: Shape) -> dict[str, Mapping[str, str]]:
    """The labels of each node the sandbox makes for `shape`."""
    return {n["metadata"]["name"]: n["metadata"]["labels"] for n in topology(shape)}


def _domains(nodes: list[str], level: str, labels: NodeLabels, levels: Levels
             ) -> set[str | None]:
    key = levels.get(level)
    return {None if key is None else labels.get(node, {}).get(key) for node in nodes}


def broken(job: Job, placed: Mapping[int, str], labels: NodeLabels, levels: Levels
           ) -> str | None:
    """What the pods bound now (index -> node) break of the job's topology, in words, or
    None. A node without the level's label is a domain of its own (None): two such pods
    apart, or one beside a labelled one, break it as two domains would."""
    said = []
    if job.required_topology is not None:
        found = _domains(list(placed.values()), job.required_topology, labels, levels)
        if len(found) > 1:
            said.append(f"its pods in {len(found)} {job.required_topology} domains")
    if job.slice_topology is not None and job.slice_size and len(placed) == job.pods:
        key = levels.get(job.slice_topology)
        counts = Counter(None if key is None else labels.get(node, {}).get(key)
                         for node in placed.values())
        if any(n % job.slice_size for n in counts.values()):
            said.append(f"slices of {job.slice_size} across {job.slice_topology} domains "
                        f"(pods per domain: {', '.join(map(str, sorted(counts.values())))})")
    return "; ".join(said) or None
