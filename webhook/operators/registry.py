"""Every operator Airlock knows, in one explicit table: how its pods are read (its gang
convention) and the kinds whose pods explain makes. The table's order is the order the
conventions are asked in (docs/admission.md, "Gang"): the first match decides.

A new operator is a folder under webhook/operators/ and one line in OPERATORS.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.conventions.base import Convention, Indexed, Membership, OwnerSized
from webhook.operators.airlock.reading import AirlockConvention
from webhook.operators.jobset import making as jobset
from webhook.operators.jobset.reading import JobSetConvention
from webhook.operators.kubeflow import making as kubeflow
from webhook.operators.kubeflow.reading import KubeflowConvention
from webhook.operators.kuberay import making as kuberay
from webhook.operators.kuberay.reading import KubeRayConvention
from webhook.operators.kubernetes import making as kubernetes
from webhook.operators.kubernetes.reading import IndexedJobConvention, SchedulingGroupConvention
from webhook.operators.kueue.reading import KueueConvention
from webhook.operators.leaderworkerset import making as leaderworkerset
from webhook.operators.leaderworkerset.reading import LeaderWorkerSetConvention
from webhook.operators.podgroup.reading import PodGroupConvention
from webhook.pods import PodView
from webhook.workloads.expansions import Expand, Expansions


@dataclass(frozen=True, slots=True)
class Operator:
    """One operator: its gang convention (`Convention`, and `OwnerSized` when only its
    object states the size) and its kinds, expanded for explain (none for an operator
    whose pods people write themselves, or whose objects make no pods)."""

    convention: Convention
    expansions: Expansions = field(default_factory=dict)


OPERATORS: tuple[Operator, ...] = (
    Operator(AirlockConvention()),
    Operator(KueueConvention()),
    Operator(LeaderWorkerSetConvention(), leaderworkerset.EXPANSIONS),
    Operator(JobSetConvention(), jobset.EXPANSIONS),
    Operator(KubeflowConvention(), kubeflow.EXPANSIONS),
    Operator(PodGroupConvention()),
    Operator(IndexedJobConvention(), kubernetes.EXPANSIONS),
    Operator(KubeRayConvention(), kuberay.EXPANSIONS),
    # Last: found in the spec, it is asked only about pods no label above claims.
    Operator(SchedulingGroupConvention()),
)

CONVENTIONS: tuple[Convention, ...] = tuple(o.convention for o in OPERATORS)
BY_SOURCE: Mapping[str, Convention] = {c.name: c for c in CONVENTIONS}
_LABELS = frozenset(c.label for c in CONVENTIONS if c.label)
_IN_SPEC = tuple(c for c in CONVENTIONS if not c.label)
# The kinds explain expands, by (API group, kind); a unit test checks no two operators
# claim one.
EXPANSIONS: Mapping[tuple[str, str], Expand] = {
    key: expand for o in OPERATORS for key, expand in o.expansions.items()}


def membership_of(pod: PodView) -> Membership | None:
    if not _LABELS.isdisjoint(pod.labels):
        for convention in CONVENTIONS:
            if convention.label and convention.label in pod.labels:
                gang = convention.detect(pod)
                if gang is not None:
                    return gang
    for convention in _IN_SPEC:
        gang = convention.detect(pod)
        if gang is not None:
            return gang
    return None


def owner_sized(source: str) -> OwnerSized | None:
    """The owner lookup of the convention that found a gang (the gang-source annotation),
    when that convention has one."""
    convention = BY_SOURCE.get(source)
    return convention if isinstance(convention, OwnerSized) else None


def indexed(source: str) -> Indexed | None:
    """The pod numbering of the convention that found a gang, when its operator numbers
    the pods."""
    convention = BY_SOURCE.get(source)
    return convention if isinstance(convention, Indexed) else None


def supported() -> list[str]:
    """The kinds explain expands, as `Kind.group` (core kinds bare), sorted."""
    return sorted(f"{kind}.{group}" if group else kind for group, kind in EXPANSIONS)
