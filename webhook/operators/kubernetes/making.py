"""The built-in kinds, as the apiserver and kube-controller-manager v1.34 make their pods
(k8s.io/kubernetes v1.34.4):
- Pod: itself;
- Deployment: pkg/controller/deployment/sync.go getNewReplicaSet (the ReplicaSet
  `<name>-<pod-template-hash>`, the hash label added to its template);
- ReplicaSet: pkg/controller/replicaset/replica_set.go via controller.GetPodFromTemplate
  (generateName `<replicaset>-`);
- StatefulSet: pkg/controller/statefulset/stateful_set_utils.go newVersionedStatefulSetPod
  (`<name>-<ordinal>`, pod-name, pod-index and controller-revision-hash labels, hostname
  and subdomain, a volume per claim template);
- DaemonSet: pkg/controller/daemon/util/daemonset_util.go CreatePodTemplate (the
  revision and template-generation labels, the tolerations every daemon pod gets) and
  ReplaceDaemonSetPodNodeNameNodeAffinity (each pod pinned to its node); one pod stands
  for all, as explain knows no nodes;
- Job: the template's labels (job-name and controller-uid, each with and without the
  batch.kubernetes.io prefix) are added by the apiserver:
  pkg/registry/batch/job/strategy.go generateSelector, unless `manualSelector`; the pods:
  pkg/controller/job/job_controller.go manageJob, and for Indexed Jobs
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

from webhook.operators.kubernetes.keys import (
    COMPLETION_INDEX,
    CONTROLLER_UID,
    DISK_PRESSURE_TAINT,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID,
    LEGACY_JOB_NAME,
    MEMORY_PRESSURE_TAINT,
    NETWORK_UNAVAILABLE_TAINT,
    NOT_READY_TAINT,
    PID_PRESSURE_TAINT,
    POD_INDEX,
    POD_TEMPLATE_HASH,
    REVISION_HASH,
    SCHEDULED_TIMESTAMP,
    STS_POD_NAME,
    TEMPLATE_GENERATION,
    TRACKING_FINALIZER,
    UNREACHABLE_TAINT,
    UNSCHEDULABLE_TAINT,
)
from webhook.workloads.expansions import (
    Context,
    Expansion,
    Expansions,
    Group,
    Pod,
    regroup,
    suspended,
)
from webhook.workloads.objects import (
    Meta,
    WorkloadError,
    count,
    mapping,
    objects,
    pod_template,
    required,
    stand_in_hash,
    text,
    within,
)
from webhook.workloads.templates import add_env, pod_from_template, with_template


def expand_pod(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = mapping(obj, "metadata", ())
    name = text(meta, "name", ("metadata",)) or text(meta, "generateName", ("metadata",))
    namespace = text(meta, "namespace", ("metadata",)) or "default"

    def make(_: int) -> Pod:
        return dict(obj)

    return Expansion("Pod", name, namespace, (Group("pod", 1, make, (obj,)),))


def expand_replicaset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "ReplicaSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    owner = meta.owner_reference()

    def make(_: int) -> Pod:
        return pod_from_template(template, namespace=meta.namespace, owner=owner,
                                 generate_name=f"{meta.name}-")

    return Expansion("ReplicaSet", meta.name, meta.namespace,
                     (Group("the pod template", replicas, make, (obj,)),))


def expand_deployment(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    meta = Meta(obj, "Deployment")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    pod_hash = stand_in_hash("Deployment", meta.namespace, meta.name, length=10)
    # The ReplicaSet name is cut so that `-<hash>` fits a DNS subdomain (253).
    rs_name = f"{meta.name[:253 - 1 - len(pod_hash)]}-{pod_hash}"
    rs_template = with_template(template, labels={POD_TEMPLATE_HASH: pod_hash})
    replicaset = {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": rs_name, "namespace": meta.namespace,
                     "labels": rs_template["metadata"]["labels"],
                     "ownerReferences": [meta.owner_reference()]},
        "spec": {"replicas": replicas, "template": rs_template},
    }
    notes = ("paused: the rollout waits until it is resumed",) if spec.get("paused") else ()
    return regroup(expand_replicaset(replicaset, ctx), "Deployment", meta.name, obj, notes)


def statefulset_pod(template: Mapping[str, Any], *, set_name: str, namespace: str,
                    ordinal: int, service_name: str, revision: str,
                    owner: Mapping[str, Any],
                    claims: list[Mapping[str, Any]] | None = None) -> Pod:
    """newStatefulSetPod + initIdentity + updateStorage + setPodRevision (the pod keeps the
    generateName GetPodFromTemplate gives it before it is named)."""
    name = f"{set_name}-{ordinal}"
    pod = pod_from_template(template, namespace=namespace, owner=owner, name=name,
                            generate_name=f"{set_name}-",
                            labels={STS_POD_NAME: name, POD_INDEX: str(ordinal),
                                    REVISION_HASH: revision})
    spec = pod["spec"]
    spec["hostname"] = name
    if service_name:
        spec["subdomain"] = service_name
    if claims:
        names = {c["metadata"]["name"] for c in claims}
        spec["volumes"] = [
            {"name": c["metadata"]["name"], "persistentVolumeClaim": {
                "claimName": f"{c['metadata']['name']}-{set_name}-{ordinal}"}}
            for c in claims
        ] + [v for v in spec.get("volumes") or [] if v.get("name") not in names]
    return pod


def expand_statefulset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "StatefulSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    start = count(mapping(spec, "ordinals", ("spec",)), "start", ("spec", "ordinals"), 0)
    service = text(spec, "serviceName", ("spec",))
    claims = [c for c in objects(spec, "volumeClaimTemplates", ("spec",))
              if isinstance(c.get("metadata"), dict) and c["metadata"].get("name")]
    revision = f"{meta.name}-{stand_in_hash('StatefulSet', meta.namespace, meta.name)}"
    owner = meta.owner_reference()

    def make(i: int) -> Pod:
        return statefulset_pod(template, set_name=meta.name, namespace=meta.namespace,
                               ordinal=start + i, service_name=service, revision=revision,
                               owner=owner, claims=claims)

    return Expansion("StatefulSet", meta.name, meta.namespace,
                     (Group("the pod template", replicas, make, (obj,)),))


# AddOrUpdateDaemonPodTolerations: (taint, effect), and the one only host-network pods get.
DAEMON_TOLERATIONS = (
    (NOT_READY_TAINT, "NoExecute"),
    (UNREACHABLE_TAINT, "NoExecute"),
    (DISK_PRESSURE_TAINT, "NoSchedule"),
    (MEMORY_PRESSURE_TAINT, "NoSchedule"),
    (PID_PRESSURE_TAINT, "NoSchedule"),
    (UNSCHEDULABLE_TAINT, "NoSchedule"),
)
HOST_NETWORK_TOLERATION = (NETWORK_UNAVAILABLE_TAINT, "NoSchedule")
EACH_NODE = "<each eligible node>"


def expand_daemonset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "DaemonSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    generation = count(mapping(obj, "metadata", ()), "generation", ("metadata",), 1)
    labels = {REVISION_HASH: stand_in_hash("DaemonSet", meta.namespace, meta.name),
              TEMPLATE_GENERATION: str(generation)}
    owner = meta.owner_reference()

    def make(_: int) -> Pod:
        pod = pod_from_template(template, namespace=meta.namespace, owner=owner,
                                generate_name=f"{meta.name}-", labels=labels)
        pod_spec = pod["spec"]
        wanted = [*DAEMON_TOLERATIONS,
                  *([HOST_NETWORK_TOLERATION] if pod_spec.get("hostNetwork") else [])]
        tolerations = list(pod_spec.get("tolerations") or [])
        have = {(t.get("key"), t.get("effect")) for t in tolerations}
        pod_spec["tolerations"] = tolerations + [
            {"key": key, "operator": "Exists", "effect": effect}
            for key, effect in wanted if (key, effect) not in have]
        affinity = pod_spec.setdefault("affinity", {})
        affinity["nodeAffinity"] = {**(affinity.get("nodeAffinity") or {}),
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [EACH_NODE]}]}]}}
        return pod

    return Expansion("DaemonSet", meta.name, meta.namespace,
                     (Group("the pod template", 1, make, (obj,)),),
                     ("one pod per eligible node; the one shown stands for all",))


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
        for key, value in ((LEGACY_JOB_NAME, meta.name), (JOB_NAME_LABEL, meta.name),
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


EXPANSIONS: Expansions = {
    ("", "Pod"): expand_pod,
    ("apps", "Deployment"): expand_deployment,
    ("apps", "ReplicaSet"): expand_replicaset,
    ("apps", "StatefulSet"): expand_statefulset,
    ("apps", "DaemonSet"): expand_daemonset,
    ("batch", "Job"): expand_job,
    ("batch", "CronJob"): expand_cronjob,
}
