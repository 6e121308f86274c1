"""Gang sizes that only the owner object knows (DESIGN.md's table), looked up with a
short-lived cache. A kind that is not installed is an answer ("not installed"), not a
crash: the gang's pods get an event saying so."""

from __future__ import annotations

import time
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.objects import PodInfo
from webhook.controller.raw import json_of

# (group, version, plural) of the training-operator kinds, by ownerReference kind.
KUBEFLOW = {
    "PyTorchJob": ("kubeflow.org", "v1", "pytorchjobs"),
    "TFJob": ("kubeflow.org", "v1", "tfjobs"),
    "XGBoostJob": ("kubeflow.org", "v1", "xgboostjobs"),
    "PaddleJob": ("kubeflow.org", "v1", "paddlejobs"),
    "JAXJob": ("kubeflow.org", "v1", "jaxjobs"),
    "MPIJob": ("kubeflow.org", "v2beta1", "mpijobs"),
}
JOBSET = ("jobset.x-k8s.io", "v1alpha2", "jobsets")
PODGROUP = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
RAYCLUSTER = ("ray.io", "v1", "rayclusters")


def _replicas(spec: dict[str, Any] | None) -> int:
    value = (spec or {}).get("replicas")
    return int(value) if isinstance(value, int) else 1


def size_of(source: str, owner: dict[str, Any], pod: PodInfo) -> int | str:
    """The gang size an owner object states, or why it cannot be read. Pure."""
    spec = owner.get("spec") or {}
    if source == "indexed-job":
        parallelism = int(spec.get("parallelism", 1))
        completions = spec.get("completions")
        return min(parallelism, int(completions)) if completions else parallelism
    if source == "kubeflow":
        specs = [v for k, v in spec.items() if k.endswith("ReplicaSpecs") and isinstance(v, dict)]
        if not specs:
            return "the owner has no replica specs"
        return sum(_replicas(r) for r in specs[0].values())
    if source == "jobset":
        name = pod.labels.get("jobset.sigs.k8s.io/replicatedjob-name")
        for rjob in spec.get("replicatedJobs") or []:
            if rjob.get("name") == name:
                job_spec = ((rjob.get("template") or {}).get("spec")) or {}
                return _replicas(rjob) * int(job_spec.get("parallelism", 1))
        return f"JobSet has no replicated job {name!r}"
    if source == "podgroup":
        return int(spec.get("minMember") or 0) or "the PodGroup sets no minMember"
    if source == "kuberay":
        return 1 + sum(_replicas(g) for g in spec.get("workerGroupSpecs") or [])
    return f"no size lookup for gang source {source!r}"


class OwnerSizes:
    def __init__(self, api: client.ApiClient, ttl: float = 30.0) -> None:
        self.api = api
        self.ttl = ttl
        self._cache: dict[tuple[str, str], tuple[float, int | str]] = {}

    def cached(self, gang: tuple[str, str]) -> int | str | None:
        hit = self._cache.get(gang)
        return hit[1] if hit and time.monotonic() - hit[0] < self.ttl else None

    async def lookup(self, gang: tuple[str, str], pod: PodInfo) -> int | str:
        found = self.cached(gang)
        if found is not None:
            return found
        try:
            owner = await self._owner(pod)
            size = owner if isinstance(owner, str) else size_of(pod.source or "", owner, pod)
        except ApiException as e:
            size = f"cannot read the owner ({e.status} {e.reason})"
        self._cache[gang] = (time.monotonic(), size)
        return size

    async def _get(self, group: str, version: str, plural: str, ns: str,
                   name: str) -> dict[str, Any] | str:
        try:
            return await json_of(await client.CustomObjectsApi(self.api)
                                 .get_namespaced_custom_object(group, version, ns, plural, name,
                                                               _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return (f"{plural}.{group}/{version} {ns}/{name} not found: the kind is not "
                        f"installed or the object is gone")
            raise

    async def _owner(self, pod: PodInfo) -> dict[str, Any] | str:
        ns, source = pod.namespace, pod.source
        if source == "indexed-job":
            name = pod.labels.get("batch.kubernetes.io/job-name", "")
            return await self._get_job(ns, name)
        if source == "kubeflow":
            for ref in pod.owners:
                if ref.get("kind") in KUBEFLOW:
                    return await self._get(*KUBEFLOW[ref["kind"]], ns, ref["name"])
            return "no Kubeflow owner among the pod's ownerReferences"
        if source == "jobset":
            return await self._get(*JOBSET, ns, pod.labels["jobset.sigs.k8s.io/jobset-name"])
        if source == "podgroup":
            return await self._get(*PODGROUP, ns, pod.labels["scheduling.x-k8s.io/pod-group"])
        if source == "kuberay":
            return await self._get(*RAYCLUSTER, ns, pod.labels["ray.io/cluster"])
        return f"gang source {source!r} states no owner to look up"

    async def _get_job(self, ns: str, name: str) -> dict[str, Any] | str:
        try:
            return await json_of(await client.BatchV1Api(self.api).read_namespaced_job(
                name, ns, _preload_content=False))
        except ApiException as e:
            if e.status == 404:
                return f"Job {ns}/{name} not found"
            raise
