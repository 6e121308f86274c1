"""Whether a gang's pods kept the topology its job requires (pure: placements in, what
broke out). A job's `requiredTopology` puts all its pods in one domain of that level, and
`sliceTopology` each `sliceSize` of them (by index) in one domain of the slice's level.
The replay judges the pods of one attempt bound at the same time: a pod gone (preempted,
done) no longer counts, so an attempt given up and its pods bound later are judged apart.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.simulation.traces import Job

# node name -> its labels; a topology level's name -> its node label (the policy's).
NodeLabels = Mapping[str, Mapping[str, str]]
Levels = Mapping[str, str]


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
    if job.slice_topology is not None and job.slice_size:
        slices: dict[int, list[str]] = {}
        for index, node in placed.items():
            slices.setdefault(index // job.slice_size, []).append(node)
        for number, nodes in sorted(slices.items()):
            found = _domains(nodes, job.slice_topology, labels, levels)
            if len(found) > 1:
                said.append(f"slice {number} in {len(found)} {job.slice_topology} domains")
    return "; ".join(said) or None
