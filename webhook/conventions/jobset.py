"""JobSet, and Kubeflow Trainer v2 which runs on it: one gang per replicated job.
Its size (replicas x the Job's parallelism) lives on the owners: the controller looks it up.
"""

from webhook.conventions.base import Membership
from webhook.pods import PodView

JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"


class JobSetConvention:
    name = "jobset"

    def detect(self, pod: PodView) -> Membership | None:
        jobset = pod.labels.get(JOBSET_LABEL)
        rjob = pod.labels.get(REPLICATED_JOB_LABEL)
        if not jobset or not rjob:
            return None
        return Membership(name=f"{jobset}-{rjob}", size=None, source=self.name)
