"""LeaderWorkerSet: each replica group (leader plus workers) is one gang."""

from webhook.conventions.base import Membership, sized
from webhook.pods import PodView

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"
SIZE_ANNOTATION = "leaderworkerset.sigs.k8s.io/size"


class LeaderWorkerSetConvention:
    name = "leaderworkerset"
    label = NAME_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        lws = pod.labels.get(NAME_LABEL)
        index = pod.labels.get(GROUP_INDEX_LABEL)
        if not lws or index is None:
            return None
        return sized(f"{lws}-{index}", self.name, pod, SIZE_ANNOTATION)
