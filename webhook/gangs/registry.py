"""The gang conventions, in the order DESIGN.md's table gives: the first match decides.

A new operator is one module with a `detect` and one line here.
"""

from webhook.gangs.airlock import AirlockConvention
from webhook.gangs.base import Convention, Gang
from webhook.gangs.indexed_job import IndexedJobConvention
from webhook.gangs.jobset import JobSetConvention
from webhook.gangs.kubeflow import KubeflowConvention
from webhook.gangs.kuberay import KubeRayConvention
from webhook.gangs.kueue import KueueConvention
from webhook.gangs.leaderworkerset import LeaderWorkerSetConvention
from webhook.gangs.podgroup import PodGroupConvention
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


def find_gang(pod: PodView) -> Gang | None:
    for convention in CONVENTIONS:
        gang = convention.detect(pod)
        if gang is not None:
            return gang
    return None
