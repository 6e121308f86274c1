"""What a pod asks of its scheduling beyond its class: an elastic gang's minimum
(`gang-min-size`), how long it expects to run (`expected-runtime`, and the pod's own
`activeDeadlineSeconds`), the topology level its gang needs or prefers one domain of
(`required-topology`, `preferred-topology`), and slices of the gang that each need one
domain of a level (`slice-required-topology`, `slice-size`). Kueue's pod-set annotations
ask the last two with node labels, for pods Kueue does not manage.

Pure: `read` runs for every pod in scope; mutation records what it finds under
Airlock's own keys, validation denies the first problem with Airlock's keys (they are the
pod's author's, who can fix them) and passes on the warnings (a Kueue annotation Airlock
cannot follow, a gang's ask on a pod in no gang).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from webhook.conventions.base import Membership
from webhook.keys import (
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_MIN_SIZE_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
)
from webhook.operators.kueue import keys as kueue
from webhook.operators.registry import indexed
from webhook.pods import PodView
from webhook.policy.model import Policy, TopologyPlacement
from webhook.values import MAX_SECONDS, Refused, count, duration, shown

# What only a gang can ask: a single pod's placement is its class's.
_GANG_KEYS = (GANG_MIN_SIZE_ANNOTATION, REQUIRED_TOPOLOGY_ANNOTATION,
              PREFERRED_TOPOLOGY_ANNOTATION, SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
              SLICE_SIZE_ANNOTATION, kueue.REQUIRED_TOPOLOGY, kueue.PREFERRED_TOPOLOGY,
              kueue.SLICE_REQUIRED_TOPOLOGY, kueue.SLICE_SIZE)
_KEYS = frozenset((*_GANG_KEYS, EXPECTED_RUNTIME_ANNOTATION))

class Slices(NamedTuple):
    # The node label of the level each slice needs one domain of.
    key: str
    size: int
    # Which slice of the gang the pod is in (from 0), when its operator numbers the
    # gang's pods.
    number: int | None


class Asks(NamedTuple):
    # A NamedTuple, like classifying.Decision: one is built for every pod in scope.
    minimum: int | None = None
    # Whole seconds.
    runtime: int | None = None
    topology: TopologyPlacement | None = None
    slices: Slices | None = None
    # The first of Airlock's keys whose value cannot be followed: validation denies it.
    problem: str | None = None
    warnings: tuple[str, ...] = ()


NOTHING = Asks()


def _levels(policy: Policy) -> Mapping[str, str]:
    """The policy's levels by their node label, for Kueue's annotations."""
    return policy.derived("asking.levels", lambda p: {
        label: name for name, label in reversed(p.topology_levels.items())})


def _known(policy: Policy) -> str:
    return ", ".join(policy.topology_levels) or "none (the policy defines no topologyLevels)"


def _whole(key: str, raw: str, at_least: int) -> int | str:
    """A count annotation, or the message that says why it is none."""
    found = count(key, raw, least=at_least)
    return f"annotation {found.message}" if isinstance(found, Refused) else found


def _runtime(pod: PodView, problems: list[str]) -> int | None:
    found: list[int] = []
    deadline = (pod.raw.get("spec") or {}).get("activeDeadlineSeconds")
    # A deadline beyond what a run time may be states no end a plan can use.
    if type(deadline) is int and 1 <= deadline <= MAX_SECONDS:
        found.append(deadline)
    raw = pod.annotations.get(EXPECTED_RUNTIME_ANNOTATION)
    if raw is not None:
        stated = duration(EXPECTED_RUNTIME_ANNOTATION, raw)
        if isinstance(stated, Refused):
            problems.append(f"annotation {stated.message}")
        else:
            found.append(stated)
    return min(found) if found else None


def _level(key: str, name: str, policy: Policy, problems: list[str]) -> str | None:
    """The node label of the level an Airlock annotation names."""
    label = policy.topology_levels.get(name.strip())
    if label is None:
        problems.append(f"annotation {key}={shown(name)} is not a topology level of the policy; "
                        f"its levels: {_known(policy)}")
    return label


def _kueue_level(key: str, label: str, policy: Policy, warnings: list[str]) -> str | None:
    """The level a Kueue annotation names by its node label."""
    name = _levels(policy).get(label.strip())
    if name is None:
        warnings.append(f"annotation {key}={shown(label)} is ignored: no topology level of the "
                        f"Airlock policy has that node label (its levels: {_known(policy)})")
    return name


def _topology(pod: PodView, policy: Policy, problems: list[str], warnings: list[str]
              ) -> TopologyPlacement | None:
    annotations = pod.annotations
    required = annotations.get(REQUIRED_TOPOLOGY_ANNOTATION)
    preferred = annotations.get(PREFERRED_TOPOLOGY_ANNOTATION)
    if required is not None and preferred is not None:
        problems.append(f"set {REQUIRED_TOPOLOGY_ANNOTATION} or {PREFERRED_TOPOLOGY_ANNOTATION}, "
                        f"not both: each names the one level the gang needs or prefers")
        return None
    for key, raw, mode in ((REQUIRED_TOPOLOGY_ANNOTATION, required, "required"),
                           (PREFERRED_TOPOLOGY_ANNOTATION, preferred, "preferred")):
        if raw is not None:
            found = _level(key, raw, policy, problems) is not None
            return TopologyPlacement(level=raw.strip(), mode=mode) if found else None
    # Airlock's own keys win: Kueue's are read only where the pod states neither.
    for key, mode in ((kueue.REQUIRED_TOPOLOGY, "required"),
                      (kueue.PREFERRED_TOPOLOGY, "preferred")):
        if (label := annotations.get(key)) is not None:
            name = _kueue_level(key, label, policy, warnings)
            return TopologyPlacement(level=name, mode=mode) if name else None
    return None


def _slice_level(pod: PodView, gang: Membership, policy: Policy, problems: list[str],
                 warnings: list[str]) -> tuple[str, int] | None:
    """The node label of the level each slice needs, and the slice's size: Airlock's pair,
    else Kueue's."""
    annotations = pod.annotations
    level = annotations.get(SLICE_REQUIRED_TOPOLOGY_ANNOTATION)
    raw_size = annotations.get(SLICE_SIZE_ANNOTATION)
    if level is not None or raw_size is not None:
        if level is None or raw_size is None:
            problems.append(f"set both {SLICE_REQUIRED_TOPOLOGY_ANNOTATION} (the level each "
                            f"slice needs one domain of) and {SLICE_SIZE_ANNOTATION} (the "
                            f"pods in a slice), or neither")
            return None
        label = _level(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, level, policy, problems)
        size = _count(SLICE_SIZE_ANNOTATION, raw_size, gang, "the pods in each slice",
                      problems)
        return (label, size) if label is not None and size is not None else None
    kueue_level = annotations.get(kueue.SLICE_REQUIRED_TOPOLOGY)
    if kueue_level is None:
        return None
    kueue_size = _whole(kueue.SLICE_SIZE, annotations.get(kueue.SLICE_SIZE, ""), 1)
    if isinstance(kueue_size, str):
        warnings.append(f"{kueue_size}: {kueue.SLICE_REQUIRED_TOPOLOGY} is ignored without a "
                        f"slice size")
        return None
    name = _kueue_level(kueue.SLICE_REQUIRED_TOPOLOGY, kueue_level, policy, warnings)
    return (policy.topology_levels[name], kueue_size) if name else None


def _slices(pod: PodView, gang: Membership, policy: Policy, problems: list[str],
            warnings: list[str]) -> Slices | None:
    asked = _slice_level(pod, gang, policy, problems, warnings)
    if asked is None:
        return None
    label, size = asked
    numbering = indexed(gang.source)
    index = numbering.index(pod) if numbering is not None else None
    return Slices(label, size, None if index is None else index // size)


def _count(key: str, raw: str, gang: Membership, what: str, problems: list[str]
           ) -> int | None:
    """A number of the gang's pods an annotation states (`what` they are): 1 to the gang's
    size, when the pods state that."""
    count = _whole(key, raw, 1)
    if isinstance(count, str):
        problems.append(f"{count}: {what}")
        return None
    if gang.size is not None and count > gang.size:
        problems.append(f"annotation {key}={shown(raw)} is more than the gang's size {gang.size}; "
                        f"{what}, 1 to {gang.size}")
        return None
    return count


def read(pod: PodView, gang: Membership | None, policy: Policy) -> Asks:
    """What the pod asks, for a pod in scope in `gang` (None: in no gang)."""
    annotations = pod.annotations
    if _KEYS.isdisjoint(annotations) and "activeDeadlineSeconds" not in (
            pod.raw.get("spec") or {}):
        return NOTHING
    problems: list[str] = []
    warnings: list[str] = []
    runtime = _runtime(pod, problems)
    if gang is None:
        stated = [k for k in _GANG_KEYS if k in annotations]
        if stated:
            warnings.append(f"{', '.join(stated)} ignored: the pod is in no gang, and only a "
                            f"gang has a minimum, a topology or slices")
        return Asks(runtime=runtime, problem=problems[0] if problems else None,
                    warnings=tuple(warnings))
    raw_minimum = annotations.get(GANG_MIN_SIZE_ANNOTATION)
    minimum = None if raw_minimum is None else _count(
        GANG_MIN_SIZE_ANNOTATION, raw_minimum, gang, "the fewest pods the gang can start with",
        problems)
    topology = _topology(pod, policy, problems, warnings)
    slices = _slices(pod, gang, policy, problems, warnings)
    return Asks(minimum, runtime, topology, slices, problems[0] if problems else None,
                tuple(warnings))
