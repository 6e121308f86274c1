"""KubeRay clusters: head plus workers start together. Size, on the RayCluster: the head
and the worker groups' pods (replicas x numOfHosts), each counted when its pods need
accelerators (a CPU-only head is not gated, so it is no member the gang waits for); with
the autoscaler on, elastic down to the groups' minReplicas."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Elastic,
    Joins,
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    at_least_one,
    named_by,
    named_by_label,
    spec_of,
    whole,
)
from webhook.operators.kuberay.keys import CLUSTER_LABEL, GROUP, VERSION
from webhook.pods import PodView


class KubeRayConvention:
    name = "kuberay"
    label = CLUSTER_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, CLUSTER_LABEL, self.name)

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        return named_by_label(labels, CLUSTER_LABEL, GROUP, VERSION, "rayclusters")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | Elastic | SizeUnknown:
        spec = spec_of(owner)
        head = spec.get("headGroupSpec")
        groups = spec.get("workerGroupSpecs")
        workers = [g for g in (groups if isinstance(groups, list) else [])
                   if isinstance(g, Mapping) and joins(g.get("template"))]
        joined = 1 if isinstance(head, Mapping) and joins(head.get("template")) else 0
        size = at_least_one(joined + sum(_pods(g, whole(g, "replicas", 1)) for g in workers),
                            "the RayCluster's members that need accelerators")
        # The CRD defaults minReplicas to 0, so it is on every stored group: it bounds
        # the worker count only where the autoscaler scales it, else the replicas run.
        if isinstance(size, SizeUnknown) or spec.get("enableInTreeAutoscaling") is not True:
            return size
        minimum = max(1, joined + sum(
            _pods(g, min(whole(g, "minReplicas", 0), whole(g, "replicas", 1))) for g in workers))
        return Elastic(size, minimum) if minimum < size else size


def _pods(group: Mapping[str, Any], replicas: int) -> int:
    """The pods `replicas` of a worker group make: numOfHosts each (a multi-host TPU)."""
    return replicas * max(1, whole(group, "numOfHosts", 1))
