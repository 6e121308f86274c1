"""Jobs and CronJobs, as the apiserver and kube-controller-manager v1.34 make their pods
(k8s.io/kubernetes v1.34.4):
- the Job's template labels (job-name and controller-uid, each with and without the
  batch.kubernetes.io prefix) are added by the apiserver:
  pkg/registry/batch/job/strategy.go generateSelector, unless `manualSelector`;
- pods: pkg/controller/job/job_controller.go manageJob, and for Indexed Jobs
  indexed_job_utils.go (the completion-index annotation and label, JOB_COMPLETION_INDEX,
  hostname `<job>-<index>`, generateName `<job>-<index>-`), with the job-tracking
  finalizer; the first min(parallelism, completions) pods are the ones created at once;
- CronJob: pkg/controller/cronjob/utils.go getJobFromTemplate2 (the Job
  `<cronjob>-<minutes since the epoch>` with the scheduled-timestamp annotation).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from webhook.conventions.indexed_job import COMPLETION_INDEX
from webhook.conventions.indexed_job import JOB_NAME_LABEL as JOB_NAME
from webhook.workloads.expansions import Context, Expansion, Group, Pod, regroup, suspended
from webhook.workloads.objects import (
    Meta,
    WorkloadError,
    count,
    mapping,
    pod_template,
    required,
    text,
    within,
)
from webhook.workloads.templates import add_env, pod_from_template

LEGACY_JOB_NAME = "job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LEGACY_CONTROLLER_UID = "controller-uid"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"
# names.MaxGeneratedNameLength: 63 less the five generated characters.
MAX_GENERATED_NAME = 58


def _index_generate_name(job: str, index: int) -> str:
    suffix = f"-{index}-"
    prefix = job + suffix
    return prefix if len(prefix) <= MAX_GENERATED_NAME else (
        prefix[:MAX_GENERATED_NAME - len(suffix)] + suffix)


def expand_job(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "Job")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    parallelism = count(spec, "parallelism", ("spec",), 1)
    # The apiserver's defaults (pkg/apis/batch/v1/defaults.go): neither count given is one
    # pod to run once; parallelism alone is a work queue with no completion count.
    completions: int | None = count(spec, "completions", ("spec",), 1)
    if spec.get("completions") is None and spec.get("parallelism") is not None:
        completions = None
    indexed = text(spec, "completionMode", ("spec",), "NonIndexed") == "Indexed"
    if indexed and completions is None:
        raise WorkloadError(("spec", "completions"), "an Indexed Job needs completions")
    active = parallelism if completions is None else min(parallelism, completions)
    labels: dict[str, str] = {}
    if not spec.get("manualSelector"):
        tlabels = (template.get("metadata") or {}).get("labels") or {}
        for key, value in ((LEGACY_JOB_NAME, meta.name), (JOB_NAME, meta.name),
                           (LEGACY_CONTROLLER_UID, meta.uid), (CONTROLLER_UID, meta.uid)):
            if key not in tlabels:
                labels[key] = value
    finalizers = list((template.get("metadata") or {}).get("finalizers") or [])
    if TRACKING_FINALIZER not in finalizers:
        finalizers.append(TRACKING_FINALIZER)
    template = {**template, "metadata": {**(template.get("metadata") or {}),
                                         "finalizers": finalizers}}
    owner = meta.owner_reference()

    def make(i: int) -> Pod:
        if not indexed:
            return pod_from_template(template, namespace=meta.namespace, owner=owner,
                                     generate_name=f"{meta.name}-", labels=labels)
        index = str(i)
        pod = pod_from_template(template, namespace=meta.namespace, owner=owner,
                                generate_name=_index_generate_name(meta.name, i),
                                labels={**labels, COMPLETION_INDEX: index},
                                annotations={COMPLETION_INDEX: index})
        pod["spec"]["hostname"] = f"{meta.name}-{i}"
        add_env(pod, [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "fieldPath": f"metadata.labels['{COMPLETION_INDEX}']"}}}])
        return pod

    notes = suspended(spec)
    return Expansion("Job", meta.name, meta.namespace,
                     (Group("the pod template", active, make, (obj,)),), notes)


def expand_cronjob(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    meta = Meta(obj, "CronJob")
    spec = mapping(obj, "spec", ())
    job_template = required(spec, "jobTemplate", ("spec",), "a Job template")
    job_spec = required(job_template, "spec", ("spec", "jobTemplate"), "a Job spec")
    pod_template(job_spec, ("spec", "jobTemplate", "spec"))
    zone_name = text(spec, "timeZone", ("spec",))
    try:
        zone = ZoneInfo(zone_name) if zone_name else UTC
    except (ZoneInfoNotFoundError, ValueError):
        raise WorkloadError(("spec", "timeZone"), f"unknown time zone {zone_name!r}") from None
    # One run stands for all: the Job scheduled for the current minute.
    scheduled = ctx.now.astimezone(UTC).replace(second=0, microsecond=0)
    job_meta = mapping(job_template, "metadata", ("spec", "jobTemplate"))
    job_name = f"{meta.name}-{int(scheduled.timestamp()) // 60}"
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {
            "name": job_name, "namespace": meta.namespace,
            "labels": dict(job_meta.get("labels") or {}),
            "annotations": {**(job_meta.get("annotations") or {}),
                            SCHEDULED_TIMESTAMP: scheduled.astimezone(zone).isoformat()
                            .replace("+00:00", "Z")},
            "ownerReferences": [meta.owner_reference()],
        },
        "spec": job_spec,
    }
    notes: tuple[str, ...] = (f"one run shown: the Job {job_name} as if scheduled now",)
    if spec.get("suspend"):
        notes += ("suspended: no Jobs are scheduled until it is resumed",)
    with within(("spec", "jobTemplate", "spec")):
        expansion = expand_job(job, ctx)
    return regroup(expansion, "CronJob", meta.name, obj, notes)
