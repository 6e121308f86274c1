"""JobSet, and Kubeflow Trainer v2 which runs on it: one gang per replicated job.
Size: the replicated job's replicas x its Job's parallelism, on the JobSet.
No pod index (`Indexed`): a pod's number in the gang is its Job's index (`JOB_INDEX`) x
the parallelism + its completion index, and the parallelism is on the JobSet, not on the
pod; the Job's index alone names the pod's slice only when a slice is exactly one Job,
which the pod cannot tell either."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Joins, Membership, SizeUnknown
from webhook.conventions.owners import LabelledOwner
from webhook.conventions.sizes import entries, gang_size, replicas, spec_of, whole
from webhook.operators.jobset.keys import GROUP, JOBSET_LABEL, REPLICATED_JOB_LABEL, VERSION
from webhook.pods import PodView


class JobSetConvention:
    name = "jobset"
    label = JOBSET_LABEL
    owner = LabelledOwner(JOBSET_LABEL, GROUP, VERSION, "jobsets")

    def detect(self, pod: PodView) -> Membership | None:
        jobset = pod.labels.get(JOBSET_LABEL)
        rjob = pod.labels.get(REPLICATED_JOB_LABEL)
        if not jobset or not rjob:
            return None
        return Membership(f"{jobset}-{rjob}", None, self.name)

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        name = labels.get(REPLICATED_JOB_LABEL)
        for rjob in entries(spec_of(owner), "replicatedJobs"):
            if rjob.get("name") == name:
                parallelism = whole(spec_of(rjob.get("template")), "parallelism", 1)
                return gang_size(replicas(rjob) * parallelism, f"replicated job {name!r}'s size")
        return SizeUnknown(f"JobSet has no replicated job {name!r}")
