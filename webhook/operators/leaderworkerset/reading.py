"""LeaderWorkerSet: each replica group (leader plus workers) is one gang. Its pods are
numbered within the group by their worker index (the leader is 0); the group index only
names the gang, as every pod of a gang shares it."""

from webhook.conventions.base import Membership, sized, whole_text
from webhook.operators.leaderworkerset.keys import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX,
)
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

    def index(self, pod: PodView) -> int | None:
        return whole_text(pod.labels.get(WORKER_INDEX))
