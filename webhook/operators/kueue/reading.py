"""Kueue plain pod groups (used here only when Kueue does not gate the pods itself)."""

from webhook.conventions.base import Membership, sized
from webhook.operators.kueue.keys import GROUP_LABEL, TOTAL_ANNOTATION
from webhook.pods import PodView


class KueueConvention:
    name = "kueue"
    label = GROUP_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        group = pod.labels.get(GROUP_LABEL)
        return sized(group, self.name, pod, TOTAL_ANNOTATION) if group else None
