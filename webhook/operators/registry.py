"""Every operator Airlock knows, in one explicit table: `INTEGRATIONS`, each operator's
folder's `integration` (its gang conventions, and the kinds whose pods explain makes).
The table's order is the order the conventions are asked in (docs/admission.md, "Gang"):
the first match decides. A convention read from the pod's spec rather than a label
(Kubernetes' PodGroups) is asked only after every label convention.

A new operator is a folder under webhook/operators/ and one line in INTEGRATIONS.
"""

from __future__ import annotations

from collections.abc import Mapping

from webhook.conventions.base import Convention, Indexed, Membership, OwnerSized
from webhook.operators.airlock import integration as airlock
from webhook.operators.integrations import Integration
from webhook.operators.jobset import integration as jobset
from webhook.operators.kubeflow import integration as kubeflow
from webhook.operators.kuberay import integration as kuberay
from webhook.operators.kubernetes import integration as kubernetes
from webhook.operators.kueue import integration as kueue
from webhook.operators.leaderworkerset import integration as leaderworkerset
from webhook.operators.podgroup import integration as podgroup
from webhook.pods import PodView
from webhook.workloads.expansions import Expand

INTEGRATIONS: tuple[Integration, ...] = (
    airlock.INTEGRATION,
    kueue.INTEGRATION,
    leaderworkerset.INTEGRATION,
    jobset.INTEGRATION,
    kubeflow.INTEGRATION,
    podgroup.INTEGRATION,
    kubernetes.INTEGRATION,
    kuberay.INTEGRATION,
)

CONVENTIONS: tuple[Convention, ...] = tuple(c for i in INTEGRATIONS for c in i.conventions)
BY_SOURCE: Mapping[str, Convention] = {c.name: c for c in CONVENTIONS}
_LABELS = frozenset(c.label for c in CONVENTIONS if c.label)
_IN_SPEC = tuple(c for c in CONVENTIONS if not c.label)
# The kinds explain expands, by (API group, kind); a unit test checks no two operators
# claim one.
EXPANSIONS: Mapping[tuple[str, str], Expand] = {
    key: expand for i in INTEGRATIONS for key, expand in i.expansions.items()}


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
