"""The coscheduling plugin's PodGroup (scheduler-plugins). Size: the PodGroup's minMember."""

from webhook.conventions.base import Membership
from webhook.pods import PodView

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class PodGroupConvention:
    name = "podgroup"

    def detect(self, pod: PodView) -> Membership | None:
        group = pod.labels.get(POD_GROUP_LABEL)
        return Membership(name=group, size=None, source=self.name) if group else None
