"""A trace's job as the objects a user writes for each system (pure: job in, manifests
out). Every system runs the same pods (same GPUs, same PriorityClass per class); what
differs is how a gang is said:

- `stock`: N plain pods, nothing more: the kube-scheduler places them one by one;
- `coscheduling`: N pods for the second scheduler, labelled with their PodGroup, and the
  PodGroup with `minMember: N`;
- `kueue`: N pods with the LocalQueue's name and Kueue's pod-group label and total count
  (a single pod: the queue label alone);
- `airlock`: N pods with the class label and the gang name and size: the webhook sets the
  PriorityClass, tolerations, topology and gate itself.

Each pod also carries the bench's own labels (job, attempt), by which the watch maps it
back to its job. A job that loses a pod to preemption starts again as a new attempt with
new pods and a new gang name, as its operator would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from bench.peers.peers import (
    COSCHEDULER,
    KUEUE_GROUP_COUNT,
    KUEUE_GROUP_LABEL,
    KUEUE_QUEUE_LABEL,
    POD_GROUP_LABEL,
)
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION
from webhook.policy.model import Policy
from webhook.sandbox.nodes import GPU
from webhook.simulation.traces import Job

System = Literal["stock", "coscheduling", "kueue", "airlock"]
SYSTEMS: tuple[System, ...] = ("stock", "coscheduling", "kueue", "airlock")

JOB_LABEL = "bench.gpu-airlock.io/job"
ATTEMPT_LABEL = "bench.gpu-airlock.io/attempt"
LOCAL_QUEUE = "gpus"
CLUSTER_QUEUE = "cluster-gpus"
FLAVOR = "default-flavor"
# The GPU nodes' taint (webhook.sandbox.nodes): what the NVIDIA device plugin's users add.
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}


@dataclass(frozen=True, slots=True)
class Attempt:
    job: Job
    number: int  # 0 for the first pods, then one more each time the job starts again

    @property
    def group(self) -> str:
        """The gang's name (and the prefix of its pods' names)."""
        return self.job.name if self.number == 0 else f"{self.job.name}-r{self.number}"

    @property
    def pod_names(self) -> list[str]:
        return [f"{self.group}-{i}" for i in range(self.job.pods)]


def _pod(attempt: Attempt, index: int) -> dict[str, Any]:
    job = attempt.job
    gpus = {GPU: str(job.gpus)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": attempt.pod_names[index], "namespace": job.namespace,
                     "labels": {JOB_LABEL: job.name, ATTEMPT_LABEL: str(attempt.number)},
                     "annotations": {}},
        "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
                 "containers": [{"name": "main", "image": "bench/job",
                                 "resources": {"requests": gpus, "limits": gpus}}]},
    }


def _user_priority(pod: dict[str, Any], job: Job, policy: Policy) -> None:
    """What a user of a system without Airlock writes for the same pod: the PriorityClass
    of its class (the cluster has them anyway) and the GPU toleration."""
    pod["spec"]["priorityClassName"] = policy.classes[job.cls].priority_class.name
    pod["spec"]["tolerations"] = [dict(GPU_TOLERATION)]


def pods(system: System, attempt: Attempt, policy: Policy) -> list[dict[str, Any]]:
    job, gang = attempt.job, attempt.job.pods > 1
    out = []
    for index in range(job.pods):
        pod = _pod(attempt, index)
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        if system == "airlock":
            labels[CLASS_LABEL] = job.cls
            if gang:
                labels[GANG_NAME_LABEL] = attempt.group
                annotations[GANG_SIZE_ANNOTATION] = str(job.pods)
        else:
            _user_priority(pod, job, policy)
        if system == "coscheduling":
            pod["spec"]["schedulerName"] = COSCHEDULER
            if gang:
                labels[POD_GROUP_LABEL] = attempt.group
        if system == "kueue":
            labels[KUEUE_QUEUE_LABEL] = LOCAL_QUEUE
            if gang:
                labels[KUEUE_GROUP_LABEL] = attempt.group
                annotations[KUEUE_GROUP_COUNT] = str(job.pods)
        out.append(pod)
    return out


def pod_group(attempt: Attempt) -> dict[str, Any] | None:
    """The coscheduling PodGroup of a gang (None for a single pod)."""
    if attempt.job.pods < 2:
        return None
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": attempt.group, "namespace": attempt.job.namespace},
            "spec": {"minMember": attempt.job.pods}}


def kueue_queues(namespaces: list[str], gpus: int) -> list[dict[str, Any]]:
    """Kueue's objects for the cluster: one ResourceFlavor, one ClusterQueue holding every
    GPU of the sandbox (preempting lower priorities within it, as the stock scheduler
    does), and a LocalQueue in each namespace."""
    api = "kueue.x-k8s.io/v1beta1"
    out: list[dict[str, Any]] = [
        {"apiVersion": api, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR}},
        {"apiVersion": api, "kind": "ClusterQueue", "metadata": {"name": CLUSTER_QUEUE},
         "spec": {"namespaceSelector": {},
                  "preemption": {"withinClusterQueue": "LowerPriority"},
                  "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                      {"name": FLAVOR,
                       "resources": [{"name": GPU, "nominalQuota": gpus}]}]}]}},
    ]
    out += [{"apiVersion": api, "kind": "LocalQueue",
             "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
             "spec": {"clusterQueue": CLUSTER_QUEUE}} for ns in namespaces]
    return out
