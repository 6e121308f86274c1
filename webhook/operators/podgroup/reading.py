"""The coscheduling plugin's PodGroup (scheduler-plugins). Size: the PodGroup's minMember."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Joins,
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    at_least_one,
    named_by,
    named_by_label,
    spec_of,
    whole,
)
from webhook.operators.podgroup.keys import GROUP, POD_GROUP_LABEL, VERSION
from webhook.pods import PodView


class PodGroupConvention:
    name = "podgroup"
    label = POD_GROUP_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, POD_GROUP_LABEL, self.name)

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        return named_by_label(labels, POD_GROUP_LABEL, GROUP, VERSION, "podgroups")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        size = whole(spec_of(owner), "minMember", 0)
        return at_least_one(size, "the PodGroup's minMember") if size else SizeUnknown(
            "the PodGroup sets no minMember")
