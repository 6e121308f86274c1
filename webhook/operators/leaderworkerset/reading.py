"""LeaderWorkerSet: each replica group (leader plus workers) is one gang."""

from webhook.conventions.base import Membership, sized
from webhook.operators.leaderworkerset.keys import GROUP_INDEX_LABEL, NAME_LABEL, SIZE_ANNOTATION
from webhook.pods import PodView


class LeaderWorkerSetConvention:
    name = "leaderworkerset"
    label = NAME_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        lws = pod.labels.get(NAME_LABEL)
        index = pod.labels.get(GROUP_INDEX_LABEL)
        if not lws or index is None:
            return None
        return sized(f"{lws}-{index}", self.name, pod, SIZE_ANNOTATION)
