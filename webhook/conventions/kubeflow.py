"""Kubeflow training-operator jobs (PyTorchJob, TFJob, ...) and MPIJob.
The size is the sum of the owner's replica specs: the controller looks it up.
"""

from webhook.conventions.base import Membership
from webhook.pods import PodView

JOB_NAME_LABEL = "training.kubeflow.org/job-name"


class KubeflowConvention:
    name = "kubeflow"

    def detect(self, pod: PodView) -> Membership | None:
        job = pod.labels.get(JOB_NAME_LABEL)
        return Membership(name=job, size=None, source=self.name) if job else None
