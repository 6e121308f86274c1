"""`spec.capacity`: asking the cluster to grow for a gang that fits no domain of today's
nodes. An autoscaler adds nodes only for pods the scheduler marks Unschedulable, and a
gated pod never is; so Airlock makes placeholder pods in the gang's image (its requests,
tolerations, node selection, one domain) that the autoscaler sees, and removes them when
the gang is admitted into the new nodes. docs/autoscaling.md."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from webhook.keys import ClassName
from webhook.policy.fields import Strict as _Strict
from webhook.policy.queues import Duration


class CapacitySpec(_Strict):
    mode: Literal["none", "placeholders", "provisioningRequest"] = Field(
        "none", description="`placeholders`: ask for the capacity a waiting gang lacks with "
        "placeholder pods an autoscaler (Karpenter, the cluster-autoscaler) scales up for. "
        "`provisioningRequest`: with an autoscaling.x-k8s.io/v1 ProvisioningRequest (the "
        "cluster-autoscaler, GKE's Dynamic Workload Scheduler). `none`: never ask.")
    provisioning_class: str = Field(
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io", alias="provisioningClass",
        pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$",
        description="The ProvisioningRequest class: best-effort-atomic-scale-up."
        "autoscaling.x-k8s.io, check-capacity.autoscaling.x-k8s.io, or GKE's "
        "queued-provisioning.gke.io.")
    timeout: Duration = Field(
        "10m", description="How long a gang's placeholders wait for the capacity; then they "
        "are removed and the request counts as failed.")
    backoff: Duration = Field(
        "5m", description="How long after a failed request the gang waits before asking "
        "again, so an autoscaler that cannot provision is not asked in a tight loop.")
    protect: tuple[ClassName, ...] = Field(
        ("training",), description="Classes whose pods carry Karpenter's do-not-disrupt "
        "annotation, so its consolidation never evicts them mid-run.")
