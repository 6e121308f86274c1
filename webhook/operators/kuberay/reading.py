"""KubeRay clusters: head plus workers start together. Size, on the RayCluster: the head
and the worker groups' pods (replicas x numOfHosts), each counted when its pods need
accelerators (a CPU-only head is not gated, so it is no member the gang waits for); with
the autoscaler on, elastic down to the groups' minReplicas."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Elastic, Joins, Membership, SizeUnknown, named_by
from webhook.conventions.owners import LabelledOwner
from webhook.conventions.sizes import elastic, entries, gang_size, replicas, spec_of, whole
from webhook.operators.kuberay.keys import CLUSTER_LABEL, GROUP, VERSION
from webhook.pods import PodView


class KubeRayConvention:
    name = "kuberay"
    label = CLUSTER_LABEL
    owner = LabelledOwner(CLUSTER_LABEL, GROUP, VERSION, "rayclusters")

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, CLUSTER_LABEL, self.name)

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | Elastic | SizeUnknown:
        spec = spec_of(owner)
        head = spec.get("headGroupSpec")
        workers = [g for g in entries(spec, "workerGroupSpecs") if joins(g.get("template"))]
        joined = 1 if isinstance(head, Mapping) and joins(head.get("template")) else 0
        size = gang_size(joined + sum(_pods(g, replicas(g)) for g in workers),
                         "the RayCluster's members that need accelerators")
        # The CRD defaults minReplicas to 0, so it is on every stored group: it bounds
        # the worker count only where the autoscaler scales it, else the replicas run.
        if isinstance(size, SizeUnknown) or spec.get("enableInTreeAutoscaling") is not True:
            return size
        return elastic(size, joined + sum(
            _pods(g, min(whole(g, "minReplicas", 0), replicas(g))) for g in workers))


def _pods(group: Mapping[str, Any], count: int) -> int:
    """The pods `count` replicas of a worker group make: numOfHosts each (a multi-host
    TPU)."""
    return count * max(1, whole(group, "numOfHosts", 1))
