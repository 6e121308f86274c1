"""Indexed Jobs: every index must run at once for the usual distributed launchers.
Size: the Job's parallelism, looked up by the controller."""

from webhook.conventions.base import Membership
from webhook.pods import PodView

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"


class IndexedJobConvention:
    name = "indexed-job"

    def detect(self, pod: PodView) -> Membership | None:
        if COMPLETION_INDEX not in pod.annotations and COMPLETION_INDEX not in pod.labels:
            return None
        job = pod.labels.get(JOB_NAME_LABEL)
        return Membership(name=job, size=None, source=self.name) if job else None
