"""The gang conventions, in the order DESIGN.md's table gives: the first match decides.

A new operator is one module (a `detect`, and an `owner` and `size` when the owner object
states the gang's size) and one line here.
"""

from collections.abc import Mapping

from webhook.conventions.base import Convention, Membership, OwnerSized
from webhook.conventions.indexed_job import IndexedJobConvention
from webhook.conventions.jobset import JobSetConvention
from webhook.conventions.kubeflow import KubeflowConvention
from webhook.conventions.kuberay import KubeRayConvention
from webhook.conventions.kueue import KueueConvention
from webhook.conventions.leaderworkerset import LeaderWorkerSetConvention
from webhook.conventions.native import AirlockConvention
from webhook.conventions.podgroup import PodGroupConvention
from webhook.pods import PodView

CONVENTIONS: tuple[Convention, ...] = (
    AirlockConvention(),
    KueueConvention(),
    LeaderWorkerSetConvention(),
    JobSetConvention(),
    KubeflowConvention(),
    PodGroupConvention(),
    IndexedJobConvention(),
    KubeRayConvention(),
)
BY_SOURCE: Mapping[str, Convention] = {c.name: c for c in CONVENTIONS}
_LABELS = frozenset(c.label for c in CONVENTIONS)


def membership_of(pod: PodView) -> Membership | None:
    labels = pod.labels
    if _LABELS.isdisjoint(labels):
        return None
    for convention in CONVENTIONS:
        if convention.label in labels:
            gang = convention.detect(pod)
            if gang is not None:
                return gang
    return None


def owner_sized(source: str) -> OwnerSized | None:
    """The owner lookup of the convention that found a gang (the gang-source annotation),
    when that convention has one."""
    convention = BY_SOURCE.get(source)
    return convention if isinstance(convention, OwnerSized) else None
