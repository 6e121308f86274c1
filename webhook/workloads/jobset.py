"""JobSets, as the JobSet controller v0.10.1 makes their Jobs (sigs.k8s.io/jobset v0.10.1):
pkg/webhooks/jobset_webhook.go Default (Indexed Jobs, restartPolicy OnFailure, DNS
hostnames on) and pkg/controllers/jobset_controller.go constructJob and
labelAndAnnotateObject (the Job `<jobset>-<replicatedJob>-<index>`, the same jobset.sigs.k8s.io
keys as labels and annotations on the Job and its pod template, the subdomain, the
node-selector strategy of exclusive placement). The Jobs' pods are then made as the Job
controller makes them (`batch`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from webhook.conventions.jobset import JOBSET_LABEL, REPLICATED_JOB_LABEL
from webhook.workloads.batch import expand_job
from webhook.workloads.expansions import Context, Expansion, Group, Pod, suspended
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

PREFIX = "jobset.sigs.k8s.io/"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_STRATEGY = "alpha.jobset.sigs.k8s.io/node-selector"
NAMESPACED_JOB = "alpha.jobset.sigs.k8s.io/namespaced-job"
NO_SCHEDULE = "alpha.jobset.sigs.k8s.io/no-schedule"


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
        "jobset-uid": meta.uid, "restart-attempt": "0",
        "replicatedjob-replicas": str(rjob.replicas),
        "global-replicas": str(sum(r.replicas for r in rjobs)), "job-index": str(index),
        "job-key": hashlib.sha1(f"{meta.namespace}/{job_name}".encode()).hexdigest(),
        "job-global-index": str(global_index), "group-name": rjob.group,
        "group-replicas": str(sum(r.replicas for r in group)),
        "job-group-index": str(group_index),
    }
    coordinator = mapping(spec, "coordinator", ("spec",))
    if coordinator:
        keys["coordinator"] = (
            f"{meta.name}-{coordinator.get('replicatedJob')}-{coordinator.get('jobIndex', 0)}"
            f"-{coordinator.get('podIndex', 0)}.{_subdomain(meta, spec)}")
    return {JOBSET_LABEL: meta.name, REPLICATED_JOB_LABEL: rjob.name,
            **{PREFIX + k: v for k, v in keys.items()}}


def _subdomain(meta: Meta, spec: Mapping[str, Any]) -> str:
    return text(mapping(spec, "network", ("spec",)), "subdomain", ("spec", "network")) or meta.name


def expand_jobset(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    meta = Meta(obj, "JobSet")
    spec = mapping(obj, "spec", ())
    rjobs = [_ReplicatedJob(r, ("spec", "replicatedJobs", i))
             for i, r in enumerate(objects(spec, "replicatedJobs", ("spec",)))]
    if not rjobs:
        raise WorkloadError(("spec", "replicatedJobs"), "is missing: no replicated jobs")
    dns = mapping(spec, "network", ("spec",)).get("enableDNSHostnames", True)
    suspend = bool(spec.get("suspend"))
    groups = []
    for rjob in rjobs:
        def job(index: int, rjob: _ReplicatedJob = rjob) -> dict[str, Any]:
            name = f"{meta.name}-{rjob.name}-{index}"
            keys = _keys(meta, spec, rjobs, rjob, index, name)
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
            if dns:
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
                             "annotations": {**(job_meta.get("annotations") or {}),
                                             **annotations},
                             "ownerReferences": [meta.owner_reference()]},
                "spec": {**rjob.spec, "completionMode":
                         rjob.spec.get("completionMode") or "Indexed",
                         "suspend": suspend, "template": template},
            }

        with within((*rjob.path, "template", "spec")):
            first = expand_job(job(0), ctx).groups[0]
        per_job = first.count

        def make(i: int, job: Any = job, per_job: int = per_job) -> Pod:
            return expand_job(job(i // per_job), ctx).groups[0].make(i % per_job)

        groups.append(Group(f"replicated job {rjob.name}", rjob.replicas * per_job, make,
                            (obj, *first.owners)))
    notes = suspended(spec)
    return Expansion("JobSet", meta.name, meta.namespace, tuple(groups), notes)
