"""Kubernetes' own gangs.
- Indexed Jobs: every index must run at once for the usual distributed launchers. Size:
  the Job's parallelism (at most its completions).
- PodGroups (scheduling.k8s.io/v1beta1, Kubernetes 1.37 with the GenericWorkload gate): a
  pod whose `spec.schedulingGroup` names a PodGroup is in its gang. Size: the group's
  `schedulingPolicy.gang.minCount`. The scheduler's own gang plugin then binds the lifted
  gang at once."""

from collections.abc import Mapping
from typing import Any

from webhook.conventions.base import Joins, Membership, SizeUnknown, whole_text
from webhook.conventions.owners import LabelledOwner
from webhook.conventions.sizes import gang_size, spec_of, whole
from webhook.keys import GANG_LABEL
from webhook.operators.kubernetes.keys import (
    COMPLETION_INDEX,
    JOB_NAME_LABEL,
    POD_GROUP_VERSION,
    SCHEDULING_GROUP,
)
from webhook.pods import PodView


class IndexedJobConvention:
    name = "indexed-job"
    label = JOB_NAME_LABEL
    owner = LabelledOwner(JOB_NAME_LABEL, "batch", "v1", "jobs")

    def detect(self, pod: PodView) -> Membership | None:
        if COMPLETION_INDEX not in pod.annotations and COMPLETION_INDEX not in pod.labels:
            return None
        job = pod.labels.get(JOB_NAME_LABEL)
        return Membership(job, None, self.name) if job else None

    def index(self, pod: PodView) -> int | None:
        return whole_text(pod.annotations.get(COMPLETION_INDEX, pod.labels.get(COMPLETION_INDEX)))

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        spec = spec_of(owner)
        parallelism = whole(spec, "parallelism", 1)
        completions = whole(spec, "completions", 0)
        return gang_size(min(parallelism, completions) if completions else parallelism,
                         "the Job's parallelism")


class SchedulingGroupConvention:
    name = "scheduling-group"
    # Named in the spec, not by a label: asked about every pod no label convention claims.
    label = ""
    # The gang label Airlock wrote holds the group's name (up to 63 characters: a longer
    # name is shortened there, and no PodGroup has the shortened one).
    owner = LabelledOwner(GANG_LABEL, SCHEDULING_GROUP, POD_GROUP_VERSION, "podgroups")

    def detect(self, pod: PodView) -> Membership | None:
        group = (pod.raw.get("spec") or {}).get("schedulingGroup")
        name = group.get("podGroupName") if isinstance(group, Mapping) else None
        return Membership(name, None, self.name) if isinstance(name, str) and name else None

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | SizeUnknown:
        policy = spec_of(owner).get("schedulingPolicy")
        gang = policy.get("gang") if isinstance(policy, Mapping) else None
        if not isinstance(gang, Mapping):
            return SizeUnknown("the PodGroup's scheduling policy is not gang")
        return gang_size(whole(gang, "minCount", 0), "the PodGroup's gang minCount")

    def priority_problem(self, owner: Mapping[str, Any], pods: int) -> str | None:
        # The priority admission plugin resolves the group's priority from its
        # priorityClassName, and kube-scheduler refuses a group whose pods differ.
        spec = spec_of(owner)
        group = spec.get("priority")
        group = group if isinstance(group, int) else 0
        if group == pods:
            return None
        named = spec.get("priorityClassName") or "none"
        return (f"the PodGroup's priority is {group} (priorityClassName {named}) and its pods' "
                f"{pods}: kube-scheduler binds no pod of such a group; create the PodGroup "
                "with the priorityClassName of its pods' class")
