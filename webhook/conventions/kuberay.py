"""KubeRay clusters: head plus workers start together. Size: 1 + the worker groups'
replicas, on the RayCluster."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    named_by_label,
    spec_of,
    whole,
)
from webhook.pods import PodView

CLUSTER_LABEL = "ray.io/cluster"


class KubeRayConvention:
    name = "kuberay"

    def detect(self, pod: PodView) -> Membership | None:
        cluster = pod.labels.get(CLUSTER_LABEL)
        return Membership(name=cluster, size=None, source=self.name) if cluster else None

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        return named_by_label(labels, CLUSTER_LABEL, "ray.io", "v1", "rayclusters")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str]) -> int | SizeUnknown:
        groups = spec_of(owner).get("workerGroupSpecs")
        workers = groups if isinstance(groups, list) else []
        return 1 + sum(whole(g, "replicas", 1) for g in workers if isinstance(g, Mapping))
