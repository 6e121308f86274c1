"""The gang conventions, in the order DESIGN.md's table gives: the first match decides.

A new operator is one module with a `detect` and one line here.
"""

from webhook.conventions.airlock import AirlockConvention
from webhook.conventions.base import Convention, Membership
from webhook.conventions.indexed_job import IndexedJobConvention
from webhook.conventions.jobset import JobSetConvention
from webhook.conventions.kubeflow import KubeflowConvention
from webhook.conventions.kuberay import KubeRayConvention
from webhook.conventions.kueue import KueueConvention
from webhook.conventions.leaderworkerset import LeaderWorkerSetConvention
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


def membership_of(pod: PodView) -> Membership | None:
    for convention in CONVENTIONS:
        gang = convention.detect(pod)
        if gang is not None:
            return gang
    return None
