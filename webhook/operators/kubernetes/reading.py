"""Indexed Jobs: every index must run at once for the usual distributed launchers.
Size: the Job's parallelism (at most its completions)."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import (
    Joins,
    Membership,
    OwnerAddress,
    OwnerRefs,
    SizeUnknown,
    at_least_one,
    named_by_label,
    spec_of,
    whole,
)
from webhook.operators.kubernetes.keys import COMPLETION_INDEX, JOB_NAME_LABEL
from webhook.pods import PodView


class IndexedJobConvention:
    name = "indexed-job"
    label = JOB_NAME_LABEL

    def detect(self, pod: PodView) -> Membership | None:
        if COMPLETION_INDEX not in pod.annotations and COMPLETION_INDEX not in pod.labels:
            return None
        job = pod.labels.get(JOB_NAME_LABEL)
        return Membership(job, None, self.name) if job else None

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        return named_by_label(labels, JOB_NAME_LABEL, "batch", "v1", "jobs")

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        spec = spec_of(owner)
        parallelism = whole(spec, "parallelism", 1)
        completions = whole(spec, "completions", 0)
        return at_least_one(min(parallelism, completions) if completions else parallelism,
                            "the Job's parallelism")
