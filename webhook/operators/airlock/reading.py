"""Airlock's own convention: label gpu-airlock.io/gang-name, annotation gang-size. Its
keys are Airlock's own, in webhook/keys.py (the webhook and the controller write and read
them too); it has no objects of its own, so nothing to make."""

from webhook.conventions.base import Membership, sized_by
from webhook.keys import GANG_NAME_LABEL, GANG_SIZE_ANNOTATION
from webhook.pods import PodView


class AirlockConvention:
    name = "airlock"
    label = GANG_NAME_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        return sized_by(pod, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION, self.name)
