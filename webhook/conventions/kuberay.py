"""KubeRay clusters: head plus workers start together. Size: looked up on the RayCluster."""

from webhook.conventions.base import Membership
from webhook.pods import PodView

CLUSTER_LABEL = "ray.io/cluster"


class KubeRayConvention:
    name = "kuberay"

    def detect(self, pod: PodView) -> Membership | None:
        cluster = pod.labels.get(CLUSTER_LABEL)
        return Membership(name=cluster, size=None, source=self.name) if cluster else None
