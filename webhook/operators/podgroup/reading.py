"""The coscheduling plugin's PodGroup (scheduler-plugins). Size: the PodGroup's minMember."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Joins, Membership, SizeUnknown, named_by
from webhook.conventions.owners import LabelledOwner
from webhook.conventions.sizes import gang_size, spec_of, whole
from webhook.operators.podgroup.keys import GROUP, POD_GROUP_LABEL, VERSION
from webhook.pods import PodView


class PodGroupConvention:
    name = "podgroup"
    label = POD_GROUP_LABEL
    owner = LabelledOwner(POD_GROUP_LABEL, GROUP, VERSION, "podgroups")

    def detect(self, pod: PodView) -> Membership | None:
        return named_by(pod, POD_GROUP_LABEL, self.name)

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        size = whole(spec_of(owner), "minMember", 0)
        return gang_size(size, "the PodGroup's minMember") if size else SizeUnknown(
            "the PodGroup sets no minMember")
