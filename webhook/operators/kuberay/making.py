"""RayClusters and RayJobs, as github.com/ray-project/kuberay/ray-operator v1.4.2 makes
their pods:
- RayCluster: controllers/ray/raycluster_controller.go buildHeadPod and buildWorkerPod,
  controllers/ray/common/pod.go DefaultHeadPodTemplate, DefaultWorkerPodTemplate and
  labelPod (generateName `<cluster>-head-` and `<cluster>-<group>-worker-`, the ray.io
  labels that the template may not override), the worker count from
  utils.GetWorkerGroupDesiredReplicas (replicas within min and max, times numOfHosts);
- RayJob: controllers/ray/rayjob_controller.go constructRayClusterForRayJob (the cluster
  `<rayjob>-<5 random characters>`, none with a clusterSelector) and createNewK8sJob (the
  submitter Job `<rayjob>` in K8sJobMode, its template from submitterPodTemplate or
  common/job.go GetDefaultSubmitterTemplate).
Not shown: the autoscaler sidecar, the init container and the Ray environment variables.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.operators.kuberay.keys import (
    API_VERSION,
    APP_NAME,
    CLUSTER_LABEL,
    CREATED_BY,
    FT_ENABLED,
    GROUP,
    GROUP_LABEL,
    IDENTIFIER,
    IS_RAY_NODE,
    NODE_TYPE,
    ORIGIN_CRD,
    ORIGIN_NAME,
)
from webhook.operators.kubernetes.making import expand_job
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
from webhook.workloads.templates import pod_from_template

# The labels a pod template may not override.
PROTECTED = (CLUSTER_LABEL, NODE_TYPE, GROUP_LABEL)
MAX_INT32 = 2**31 - 1


def _pod_name(prefix: str, node_type: str) -> str:
    """utils.PodName with isGenerateName."""
    return f"{prefix[:50]}-{node_type}-".lower()


def _check_label(value: str) -> str:
    """utils.CheckLabel: the last 63 characters, not starting with punctuation."""
    value = value[-63:]
    return "r" + value[1:] if value and not value[0].isalnum() else value


def _labels(node_type: str, cluster: str, group: str,
            template: Mapping[str, Any]) -> dict[str, str]:
    """labelPod: the operator's labels, then the template's, except the three it keeps."""
    labels = {IS_RAY_NODE: "yes", CLUSTER_LABEL: cluster, NODE_TYPE: node_type,
              GROUP_LABEL: group, IDENTIFIER: _check_label(f"{cluster}-{node_type}"),
              APP_NAME: "kuberay", CREATED_BY: "kuberay-operator"}
    for k, v in ((template.get("metadata") or {}).get("labels") or {}).items():
        if k not in PROTECTED:
            labels[k] = v
    return labels


def _workers(group: Mapping[str, Any], path: tuple[str | int, ...]) -> int:
    """GetWorkerGroupDesiredReplicas, with the CRD's defaults."""
    if group.get("suspend"):
        return 0
    minimum = count(group, "minReplicas", path, 0)
    maximum = count(group, "maxReplicas", path, MAX_INT32)
    replicas = group.get("replicas")
    if minimum > maximum:
        wanted = maximum
    elif replicas is None or count(group, "replicas", path, 0) < minimum:
        wanted = minimum
    else:
        wanted = min(count(group, "replicas", path, 0), maximum)
    return wanted * max(1, count(group, "numOfHosts", path, 1))


def expand_raycluster(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "RayCluster")
    spec = required(obj, "spec", (), "a RayCluster spec")
    head = required(spec, "headGroupSpec", ("spec",), "a head group")
    head_template = pod_template(head, ("spec", "headGroupSpec"))
    ft = (meta.annotations.get(FT_ENABLED, "").lower() == "true"
          or spec.get("gcsFaultToleranceOptions") is not None)
    owner = meta.owner_reference()

    def head_pod(_: int) -> Pod:
        return pod_from_template(
            head_template, namespace=meta.namespace, owner=owner,
            generate_name=_pod_name(meta.name, "head"),
            labels=_labels("head", meta.name, "headgroup", head_template),
            annotations={FT_ENABLED: str(ft).lower()})

    groups = [Group("the head", 1, head_pod, (obj,))]
    for i, group in enumerate(objects(spec, "workerGroupSpecs", ("spec",))):
        path = ("spec", "workerGroupSpecs", i)
        name = text(group, "groupName", path)
        if not name:
            raise WorkloadError((*path, "groupName"), "is missing: a worker group needs a name")
        template = pod_template(group, path)

        def worker(_: int, name: str = name, template: Mapping[str, Any] = template) -> Pod:
            return pod_from_template(
                template, namespace=meta.namespace, owner=owner,
                generate_name=_pod_name(f"{meta.name}-{name}", "worker"),
                labels=_labels("worker", meta.name, name, template))

        groups.append(Group(f"worker group {name}", _workers(group, path), worker, (obj,)))
    notes = suspended(spec)
    return Expansion("RayCluster", meta.name, meta.namespace, tuple(groups), notes)


def _submitter_template(spec: Mapping[str, Any],
                        cluster_spec: Mapping[str, Any]) -> Mapping[str, Any]:
    given = mapping(spec, "submitterPodTemplate", ("spec",))
    if given:
        return pod_template(spec, ("spec",), "submitterPodTemplate")
    head = (cluster_spec.get("headGroupSpec") or {}).get("template") or {}
    containers = (head.get("spec") or {}).get("containers") or [{}]
    return {"spec": {"restartPolicy": "Never", "containers": [{
        "name": "ray-job-submitter", "image": containers[0].get("image"),
        "resources": {"limits": {"cpu": "1", "memory": "1Gi"},
                      "requests": {"cpu": "500m", "memory": "200Mi"}}}]}}


def expand_rayjob(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    meta = Meta(obj, "RayJob")
    spec = mapping(obj, "spec", ())
    origin = {ORIGIN_NAME: meta.name, ORIGIN_CRD: "RayJob"}
    groups: list[Group] = []
    cluster_spec: Mapping[str, Any] = {}
    if not mapping(spec, "clusterSelector", ("spec",)):
        cluster_spec = required(spec, "rayClusterSpec", ("spec",),
                                "a rayClusterSpec (or a clusterSelector)")
        name = f"{meta.name}-{stand_in_hash('RayJob', meta.namespace, meta.name, length=5)}"
        cluster = {
            "apiVersion": API_VERSION, "kind": "RayCluster",
            "metadata": {"name": name, "namespace": meta.namespace,
                         "labels": {**meta.labels, **origin},
                         "annotations": dict(meta.annotations),
                         "ownerReferences": [meta.owner_reference()]},
            "spec": cluster_spec,
        }
        with within(("spec", "rayClusterSpec")):
            groups.extend(regroup(expand_raycluster(cluster, ctx), "RayJob", meta.name,
                                  obj).groups)
    if text(spec, "submissionMode", ("spec",), "K8sJobMode") == "K8sJobMode":
        submitter_config = mapping(spec, "submitterConfig", ("spec",))
        job = {
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": meta.name, "namespace": meta.namespace,
                         "labels": {**origin, CREATED_BY: "kuberay-operator"},
                         "ownerReferences": [meta.owner_reference()]},
            "spec": {"backoffLimit": submitter_config.get("backoffLimit", 2),
                     "template": _submitter_template(spec, cluster_spec)},
        }
        submitter = expand_job(job, ctx).groups[0]
        groups.append(Group("the submitter", submitter.count, submitter.make,
                            (obj, *submitter.owners)))
    notes = suspended(spec)
    return Expansion("RayJob", meta.name, meta.namespace, tuple(groups), notes)


EXPANSIONS: Expansions = {
    (GROUP, "RayCluster"): expand_raycluster,
    (GROUP, "RayJob"): expand_rayjob,
}
