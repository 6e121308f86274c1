"""Kubeflow training-operator jobs (PyTorchJob, TFJob, ...) and MPIJob.
Size: the sum of the replicas in the owner's replica specs whose pods need accelerators;
with an `elasticPolicy` (PyTorchJob, PaddleJob), elastic down to its `minReplicas` workers."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Elastic, Joins, Membership, SizeUnknown, named_by
from webhook.conventions.owners import ReferencedOwner
from webhook.conventions.sizes import elastic, gang_size, replicas, spec_of, whole
from webhook.operators.kubeflow.keys import GROUP, JOB_NAME_LABEL, PLURALS
from webhook.pods import PodView


class KubeflowConvention:
    name = "kubeflow"
    label = JOB_NAME_LABEL
    owner = ReferencedOwner(GROUP, PLURALS, "Kubeflow")

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, JOB_NAME_LABEL, self.name)

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | Elastic | SizeUnknown:
        spec = spec_of(owner)
        specs = [v for k, v in spec.items()
                 if k.endswith("ReplicaSpecs") and isinstance(v, Mapping)]
        if not specs:
            return SizeUnknown("the owner has no replica specs")
        # A replica type whose pods need no accelerator (an MPI launcher) is not gated.
        members = {str(k).lower(): r for k, r in specs[0].items()
                   if isinstance(r, Mapping) and joins(r.get("template"))}
        size = gang_size(sum(replicas(r) for r in members.values()),
                         "the sum of the owner's replicas that need accelerators")
        policy = spec.get("elasticPolicy")
        workers = members.get("worker")
        if isinstance(size, SizeUnknown) or not isinstance(policy, Mapping) or workers is None:
            return size
        # training-operator v1.9.2 scales only the Workers between the elasticPolicy's bounds
        # (the scale subresource is Worker.replicas; torchrun's --nnodes=min:max and the HPA
        # take minReplicas:maxReplicas); a Master, when it joins, is always needed. Its
        # defaulting gives a missing minReplicas maxReplicas' value, and both missing the
        # Worker replicas: then the gang is not elastic.
        stated = replicas(workers)
        least = min(whole(policy, "minReplicas", whole(policy, "maxReplicas", stated)), stated)
        return elastic(size, size - stated + least)
