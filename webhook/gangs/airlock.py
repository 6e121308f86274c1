"""Airlock's own convention: label gpu-airlock.io/gang-name, annotation gang-size."""

from webhook.gangs.base import Gang, sized
from webhook.keys import GANG_NAME_LABEL, GANG_SIZE_ANNOTATION
from webhook.pods import PodView


class AirlockConvention:
    name = "airlock"

    def detect(self, pod: PodView) -> Gang | None:
        gang = pod.labels.get(GANG_NAME_LABEL)
        return sized(gang, self.name, pod, GANG_SIZE_ANNOTATION) if gang else None
