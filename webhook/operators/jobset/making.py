"""JobSets, as the JobSet controller v0.10.1 makes their Jobs (sigs.k8s.io/jobset v0.10.1):
pkg/webhooks/jobset_webhook.go Default (Indexed Jobs, restartPolicy OnFailure, DNS
hostnames on) and pkg/controllers/jobset_controller.go constructJob and
labelAndAnnotateObject (the Job `<jobset>-<replicatedJob>-<index>`, the same jobset.sigs.k8s.io
keys as labels and annotations on the Job and its pod template, the subdomain, the
node-selector strategy of exclusive placement). The Jobs' pods are then made as the Job
controller makes them (`webhook.operators.kubernetes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from webhook.operators.jobset.keys import (
    COORDINATOR,
    EXCLUSIVE,
    GLOBAL_REPLICAS,
    GROUP,
    GROUP_NAME,
    GROUP_REPLICAS,
    JOB_GLOBAL_INDEX,
    JOB_GROUP_INDEX,
    JOB_INDEX,
    JOB_KEY,
    JOBSET_LABEL,
    JOBSET_UID,
    NAMESPACED_JOB,
    NO_SCHEDULE,
    NODE_SELECTOR_STRATEGY,
    REPLICATED_JOB_LABEL,
    REPLICATED_JOB_REPLICAS,
    RESTART_ATTEMPT,
)
from webhook.operators.kubernetes.making import expand_job
from webhook.workloads.expansions import (
    Context,
    Expansion,
    Expansions,
    Group,
    Pod,
    suspended,
)
from webhook.workloads.objects import (
    FieldPath,
    Meta,
    WorkloadError,
    count,
    mapping,
    objects,
    pod_template,
    required,
    text,
    within,
)
from webhook.workloads.templates import with_template


class _ReplicatedJob:
    def __init__(self, rjob: Mapping[str, Any], path: FieldPath) -> None:
        self.name = text(rjob, "name", path)
        if not self.name:
            raise WorkloadError((*path, "name"), "is missing: a replicated job needs a name")
        self.group = text(rjob, "groupName", path, "default")
        self.replicas = count(rjob, "replicas", path, 1)
        self.template = required(rjob, "template", path, "a Job template")
        self.spec = required(self.template, "spec", (*path, "template"), "a Job spec")
        pod_template(self.spec, (*path, "template", "spec"))
        self.path = path


def _keys(meta: Meta, spec: Mapping[str, Any], rjobs: list[_ReplicatedJob],
          rjob: _ReplicatedJob, index: int, job_name: str) -> dict[str, str]:
    """labelAndAnnotateObject: the same keys as labels and annotations."""
    global_index = sum(r.replicas for r in rjobs[:rjobs.index(rjob)]) + index
    group = [r for r in rjobs if r.group == rjob.group]
    group_index = sum(r.replicas for r in group[:group.index(rjob)]) + index
    keys = {
        JOBSET_LABEL: meta.name, REPLICATED_JOB_LABEL: rjob.name,
        JOBSET_UID: meta.uid, RESTART_ATTEMPT: "0",
        REPLICATED_JOB_REPLICAS: str(rjob.replicas),
        GLOBAL_REPLICAS: str(sum(r.replicas for r in rjobs)), JOB_INDEX: str(index),
        JOB_KEY: hashlib.sha1(f"{meta.namespace}/{job_name}".encode()).hexdigest(),
        JOB_GLOBAL_INDEX: str(global_index), GROUP_NAME: rjob.group,
        GROUP_REPLICAS: str(sum(r.replicas for r in group)),
        JOB_GROUP_INDEX: str(group_index),
    }
    coordinator = mapping(spec, "coordinator", ("spec",))
    if coordinator:
        keys[COORDINATOR] = (
            f"{meta.name}-{coordinator.get('replicatedJob')}-{coordinator.get('jobIndex', 0)}"
            f"-{coordinator.get('podIndex', 0)}.{_subdomain(meta, spec)}")
    return keys


def _subdomain(meta: Meta, spec: Mapping[str, Any]) -> str:
    return text(mapping(spec, "network", ("spec",)), "subdomain", ("spec", "network")) or meta.name


class _JobSet:
    """What the Jobs of a JobSet share; `job` makes the Job of a replicated job's index."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.meta = Meta(obj, "JobSet")
        self.spec = spec = mapping(obj, "spec", ())
        self.rjobs = [_ReplicatedJob(r, ("spec", "replicatedJobs", i))
                      for i, r in enumerate(objects(spec, "replicatedJobs", ("spec",)))]
        if not self.rjobs:
            raise WorkloadError(("spec", "replicatedJobs"), "is missing: no replicated jobs")
        self.dns = mapping(spec, "network", ("spec",)).get("enableDNSHostnames", True)
        self.suspend = bool(spec.get("suspend"))

    def job(self, rjob: _ReplicatedJob, index: int) -> dict[str, Any]:
        """constructJob: the Job of `rjob`'s index, its template labelled and placed."""
        meta, spec = self.meta, self.spec
        name = f"{meta.name}-{rjob.name}-{index}"
        keys = _keys(meta, spec, self.rjobs, rjob, index, name)
        job_meta = mapping(rjob.template, "metadata", (*rjob.path, "template"))
        annotations = dict(keys)
        for source in (meta.annotations, job_meta.get("annotations") or {}):
            if EXCLUSIVE in source:
                annotations[EXCLUSIVE] = source[EXCLUSIVE]
                if NODE_SELECTOR_STRATEGY in source:
                    annotations[NODE_SELECTOR_STRATEGY] = source[NODE_SELECTOR_STRATEGY]
        labels = dict(keys)
        pod_spec: dict[str, Any] = {}
        tspec = rjob.spec["template"].get("spec") or {}
        pod_spec["restartPolicy"] = tspec.get("restartPolicy") or "OnFailure"
        if self.dns:
            pod_spec["subdomain"] = _subdomain(meta, spec)
        if EXCLUSIVE in annotations and NODE_SELECTOR_STRATEGY in annotations:
            pod_spec["nodeSelector"] = {**(tspec.get("nodeSelector") or {}),
                                        NAMESPACED_JOB: f"{meta.namespace}_{name}"}
            pod_spec["tolerations"] = [*(tspec.get("tolerations") or []), {
                "key": NO_SCHEDULE, "operator": "Exists", "effect": "NoSchedule"}]
        template = with_template(rjob.spec["template"], labels=labels,
                                 annotations=annotations, spec=pod_spec)
        return {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": meta.namespace,
                         "labels": {**(job_meta.get("labels") or {}), **labels},
                         "annotations": {**(job_meta.get("annotations") or {}), **annotations},
                         "ownerReferences": [meta.owner_reference()]},
            "spec": {**rjob.spec, "completionMode": rjob.spec.get("completionMode") or "Indexed",
                     "suspend": self.suspend, "template": template},
        }


def expand_jobset(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    jobset = _JobSet(obj)
    groups = []
    for rjob in jobset.rjobs:
        with within((*rjob.path, "template", "spec")):
            first = expand_job(jobset.job(rjob, 0), ctx).groups[0]
        per_job = first.count

        def make(i: int, rjob: _ReplicatedJob = rjob, per_job: int = per_job) -> Pod:
            return expand_job(jobset.job(rjob, i // per_job), ctx).groups[0].make(i % per_job)

        groups.append(Group(f"replicated job {rjob.name}", rjob.replicas * per_job, make,
                            (obj, *first.owners)))
    return Expansion("JobSet", jobset.meta.name, jobset.meta.namespace, tuple(groups),
                     suspended(jobset.spec))


EXPANSIONS: Expansions = {(GROUP, "JobSet"): expand_jobset}
