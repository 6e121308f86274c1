"""The kinds explain expands, by (API group, kind), and the kinds known to make no pods.

A new kind is one expansion function and one line here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.workloads.apps import (
    expand_daemonset,
    expand_deployment,
    expand_replicaset,
    expand_statefulset,
)
from webhook.workloads.batch import expand_cronjob, expand_job
from webhook.workloads.core import expand_pod
from webhook.workloads.expansions import Context, Expansion
from webhook.workloads.jobset import expand_jobset
from webhook.workloads.kubeflow import expand_mpijob, expand_training_job
from webhook.workloads.kuberay import expand_raycluster, expand_rayjob
from webhook.workloads.leaderworkerset import expand_leaderworkerset
from webhook.workloads.objects import WorkloadError

Expand = Callable[[Mapping[str, Any], Context], Expansion]

EXPANSIONS: dict[tuple[str, str], Expand] = {
    ("", "Pod"): expand_pod,
    ("apps", "Deployment"): expand_deployment,
    ("apps", "ReplicaSet"): expand_replicaset,
    ("apps", "StatefulSet"): expand_statefulset,
    ("apps", "DaemonSet"): expand_daemonset,
    ("batch", "Job"): expand_job,
    ("batch", "CronJob"): expand_cronjob,
    ("jobset.x-k8s.io", "JobSet"): expand_jobset,
    ("kubeflow.org", "PyTorchJob"): expand_training_job,
    ("kubeflow.org", "TFJob"): expand_training_job,
    ("kubeflow.org", "XGBoostJob"): expand_training_job,
    ("kubeflow.org", "PaddleJob"): expand_training_job,
    ("kubeflow.org", "JAXJob"): expand_training_job,
    ("kubeflow.org", "MPIJob"): expand_mpijob,
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): expand_leaderworkerset,
    ("ray.io", "RayCluster"): expand_raycluster,
    ("ray.io", "RayJob"): expand_rayjob,
}

# Objects that often sit beside workloads in a manifest and make no pods themselves.
NO_PODS: frozenset[tuple[str, str]] = frozenset({
    ("", "ConfigMap"), ("", "Secret"), ("", "Service"), ("", "ServiceAccount"),
    ("", "Namespace"), ("", "PersistentVolumeClaim"), ("", "PersistentVolume"),
    ("", "LimitRange"), ("", "ResourceQuota"), ("", "Endpoints"),
    ("apps", "ControllerRevision"), ("policy", "PodDisruptionBudget"),
    ("autoscaling", "HorizontalPodAutoscaler"), ("scheduling.k8s.io", "PriorityClass"),
    ("networking.k8s.io", "Ingress"), ("networking.k8s.io", "NetworkPolicy"),
    ("discovery.k8s.io", "EndpointSlice"), ("storage.k8s.io", "StorageClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("rbac.authorization.k8s.io", "Role"), ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("scheduling.x-k8s.io", "PodGroup"),
    ("kueue.x-k8s.io", "LocalQueue"), ("kueue.x-k8s.io", "ClusterQueue"),
    ("kueue.x-k8s.io", "ResourceFlavor"), ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    ("monitoring.coreos.com", "ServiceMonitor"), ("monitoring.coreos.com", "PodMonitor"),
    ("cert-manager.io", "Certificate"), ("cert-manager.io", "Issuer"),
    ("cert-manager.io", "ClusterIssuer"),
})


def group_kind(obj: Mapping[str, Any]) -> tuple[str, str]:
    """(API group, kind) of an object: `apps/v1` is group apps, `v1` the core group."""
    api_version = obj.get("apiVersion")
    kind = obj.get("kind")
    if not isinstance(api_version, str) or not api_version:
        raise WorkloadError(("apiVersion",), "is missing")
    if not isinstance(kind, str) or not kind:
        raise WorkloadError(("kind",), "is missing")
    return (api_version.rpartition("/")[0], kind)


def supported() -> list[str]:
    """The kinds explain expands, as `Kind.group` (core kinds bare), sorted."""
    return sorted(f"{kind}.{group}" if group else kind for group, kind in EXPANSIONS)
