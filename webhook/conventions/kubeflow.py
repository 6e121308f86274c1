"""Kubeflow training-operator jobs (PyTorchJob, TFJob, ...) and MPIJob.
Size: the sum of the replicas in the owner's replica specs."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    at_least_one,
    spec_of,
    whole,
)
from webhook.pods import PodView

JOB_NAME_LABEL = "training.kubeflow.org/job-name"
GROUP = "kubeflow.org"
# (version, plural) of each kind, by the kind its pods' ownerReferences name.
KINDS = {
    "PyTorchJob": ("v1", "pytorchjobs"),
    "TFJob": ("v1", "tfjobs"),
    "XGBoostJob": ("v1", "xgboostjobs"),
    "PaddleJob": ("v1", "paddlejobs"),
    "JAXJob": ("v1", "jaxjobs"),
    "MPIJob": ("v2beta1", "mpijobs"),
}


class KubeflowConvention:
    name = "kubeflow"

    def detect(self, pod: PodView) -> Membership | None:
        job = pod.labels.get(JOB_NAME_LABEL)
        return Membership(name=job, size=None, source=self.name) if job else None

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        for ref in refs:
            kind, name = ref.get("kind"), ref.get("name")
            if kind in KINDS and isinstance(name, str):
                return OwnerAddress(GROUP, *KINDS[kind], name)
        return SizeUnknown("no Kubeflow owner among the pod's ownerReferences")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str]) -> int | SizeUnknown:
        specs = [v for k, v in spec_of(owner).items()
                 if k.endswith("ReplicaSpecs") and isinstance(v, Mapping)]
        if not specs:
            return SizeUnknown("the owner has no replica specs")
        return at_least_one(sum(whole(r, "replicas", 1) for r in specs[0].values()),
                            "the sum of the owner's replicas")
