"""Kueue plain pod groups (used here only when Kueue does not gate the pods itself)."""

from webhook.conventions.base import Membership, sized_by
from webhook.operators.kueue.keys import GROUP_LABEL, TOTAL_ANNOTATION
from webhook.pods import PodView


class KueueConvention:
    name = "kueue"
    label = GROUP_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        return sized_by(pod, GROUP_LABEL, TOTAL_ANNOTATION, self.name)
