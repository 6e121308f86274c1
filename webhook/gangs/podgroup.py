"""The coscheduling plugin's PodGroup (scheduler-plugins). Size: the PodGroup's minMember."""

from webhook.gangs.base import Gang
from webhook.pods import PodView

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class PodGroupConvention:
    name = "podgroup"

    def detect(self, pod: PodView) -> Gang | None:
        group = pod.labels.get(POD_GROUP_LABEL)
        return Gang(name=group, size=None, source=self.name) if group else None
