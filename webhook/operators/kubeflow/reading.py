"""Kubeflow training-operator jobs (PyTorchJob, TFJob, ...) and MPIJob.
Size: the sum of the replicas in the owner's replica specs whose pods need accelerators."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Joins,
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    at_least_one,
    named_by,
    spec_of,
    whole,
)
from webhook.operators.kubeflow.keys import GROUP, JOB_NAME_LABEL, PLURALS
from webhook.pods import PodView


class KubeflowConvention:
    name = "kubeflow"
    label = JOB_NAME_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, JOB_NAME_LABEL, self.name)

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        for ref in refs:
            kind, name, api_version = ref.get("kind"), ref.get("name"), ref.get("apiVersion")
            group, _, version = str(api_version).partition("/")
            if kind in PLURALS and isinstance(name, str) and group == GROUP and version:
                return OwnerAddress(GROUP, version, PLURALS[kind], name)
        return SizeUnknown("no Kubeflow owner among the pod's ownerReferences")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        specs = [v for k, v in spec_of(owner).items()
                 if k.endswith("ReplicaSpecs") and isinstance(v, Mapping)]
        if not specs:
            return SizeUnknown("the owner has no replica specs")
        # A replica type whose pods need no accelerator (an MPI launcher) is not gated.
        members = [r for r in specs[0].values()
                   if isinstance(r, Mapping) and joins(r.get("template"))]
        return at_least_one(sum(whole(r, "replicas", 1) for r in members),
                            "the sum of the owner's replicas that need accelerators")
