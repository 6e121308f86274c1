"""An object's (API group, kind), and the kinds known to make no pods: explain skips those
with a note, and names any other kind it has no expansion for
(`webhook.operators.registry`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.workloads.objects import WorkloadError

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
    # DRA: what pods' claims ask for (explain reads the claims and templates in the files).
    ("resource.k8s.io", "ResourceClaim"), ("resource.k8s.io", "ResourceClaimTemplate"),
    ("resource.k8s.io", "DeviceClass"), ("resource.k8s.io", "ResourceSlice"),
    ("resource.nvidia.com", "ComputeDomain"),
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
