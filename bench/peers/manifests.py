"""A trace's job as the objects a user writes for each system (pure: job in, manifests
out). Every system runs the same pods (same GPUs, same PriorityClass per class); what
differs is how a gang, and what the job states of itself, is said:

- `stock`: N plain pods: the kube-scheduler places them one by one;
- `coscheduling`: N pods for the second scheduler, labelled with their PodGroup, and the
  PodGroup with `minMember: N`, or an elastic job's `minPods` (the rest are scheduled as
  room comes); it has no word for a run time;
- `kueue`: N pods with the LocalQueue's name and Kueue's pod-group label and total count
  (a single pod: the queue label alone), and the topology: the job's `requiredTopology`
  (`kueue.x-k8s.io/podset-required-topology`), else the one the job's class asks of
  Airlock (`-required-topology` or `-preferred-topology`), each as the level's node
  label; a sliced job's `podset-slice-required-topology` and `podset-slice-size`. Kueue
  admits a plain pod group whole (partial admission and elastic workloads are for
  batch Jobs, Ray and Spark), so an elastic job is the whole gang; nor has it a word
  for a run time a job expects;
- `airlock`: N pods with the class label and the gang name, and the annotations a trace's
  fields are in Airlock's words (`airlock_annotations`, as `airlock simulate` writes
  them, `gpu-airlock.io/gpu-models` for the models a job names): the webhook sets the
  PriorityClass, tolerations, topology and gate itself.

A job's `nodeSelector` is every system's pods' own; the models it names (`gpuModels`)
are, but for Airlock, a required node affinity on the models' node labels
(`model_affinity`). Neither scheduler has a word for a gang's topology, so the stock and
coscheduling pods say it as a user of plain Kubernetes does (`gang_affinity`): an
inter-pod affinity among the gang's pods on the level's node label, required for the
job's `requiredTopology`, else as its class asks of Airlock; and a required one among
each slice's pods, labelled with their slice, on the slice's level. Kueue and Airlock
are given the same constraints in their own words, so no system's figures are bought by
breaking one.

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
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL
from webhook.operators.kueue.keys import PREFERRED_TOPOLOGY as KUEUE_PREFERRED
from webhook.operators.kueue.keys import REQUIRED_TOPOLOGY as KUEUE_REQUIRED
from webhook.operators.kueue.keys import SLICE_REQUIRED_TOPOLOGY as KUEUE_SLICE_TOPOLOGY
from webhook.operators.kueue.keys import SLICE_SIZE as KUEUE_SLICE_SIZE
from webhook.policy.model import Policy
from webhook.pools import PRODUCT_LABEL
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, GPU, HOST_LABEL, Shape
from webhook.simulation.traces import Job, airlock_annotations

System = Literal["stock", "coscheduling", "kueue", "airlock"]
SYSTEMS: tuple[System, ...] = ("stock", "coscheduling", "kueue", "airlock")

JOB_LABEL = "bench.gpu-airlock.io/job"
ATTEMPT_LABEL = "bench.gpu-airlock.io/attempt"
# A sliced job's pods, for the stock and coscheduling pods' affinity: the slice's index.
SLICE_LABEL = "bench.gpu-airlock.io/slice"
LOCAL_QUEUE = "gpus"
COHORT = "gpus"
FLAVOR = "gpu-nodes"
TOPOLOGY = "gpu-topology"
KUEUE_API = "kueue.x-k8s.io/v1beta2"
# The sandbox's levels, outermost first, as a Kueue Topology lists them (the hostname
# last: Kueue's TAS assigns pods to nodes at that level).
KUEUE_LEVELS = (BLOCK_LABEL, CLIQUE_LABEL, HOST_LABEL)
KUEUE_TOPOLOGY = {"required": KUEUE_REQUIRED, "preferred": KUEUE_PREFERRED}
# The GPU nodes' taint (webhook.sandbox.nodes): what the NVIDIA device plugin's users add.
GPU_TOLERATION = {"key": GPU, "operator": "Exists", "effect": "NoSchedule"}
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


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
                                 "resources": {"requests": gpus, "limits": gpus}}],
                 **({"nodeSelector": dict(job.node_selector)} if job.node_selector else {})},
    }


def model_affinity(job: Job, policy: Policy) -> dict[str, Any] | None:
    """The models a job names (`gpuModels`), as a user of a system without Airlock's word
    for them writes it: a required node affinity, a term per model (any of them), each
    on the model's node labels. The order of preference is not said: Kueue tries its
    flavors in the ClusterQueue's order, the schedulers score nodes as they do."""
    if not job.gpu_models:
        return None
    labels = {m.name: m.node_labels for m in policy.gpu_models}  # every name: check_models
    terms = [{"matchExpressions": [{"key": key, "operator": "In", "values": [value]}
                                   for key, value in sorted(labels[name].items())]}
             for name in job.gpu_models]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": terms}}}


def _together(attempt: Attempt, key: str, extra: dict[str, str] | None = None
              ) -> dict[str, Any]:
    """An affinity term: on the nodes sharing `key`'s value with the attempt's pods (of
    the same slice, with `extra`)."""
    labels = {JOB_LABEL: attempt.job.name, ATTEMPT_LABEL: str(attempt.number), **(extra or {})}
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def gang_affinity(attempt: Attempt, index: int, policy: Policy) -> dict[str, Any] | None:
    """The topology the gang's pod `index` is bound by, as a plain-Kubernetes user writes
    it (the module's docstring); None for a single pod or a job with no topology. The
    scheduler lets the first pod of a gang anywhere (no pod matches yet, and it matches
    its own term), then keeps the rest beside it."""
    job = attempt.job
    if job.pods < 2:
        return None
    out: dict[str, list[dict[str, Any]]] = {}
    if (wanted := _gang_level(job, policy)) is not None:
        mode, label = wanted
        term = _together(attempt, label)
        if mode == "required":
            out[_REQUIRED] = [term]
        else:
            out[_PREFERRED] = [{"weight": 100, "podAffinityTerm": term}]
    if job.slice_topology is not None and (number := _slice_of(job, index)) is not None:
        out.setdefault(_REQUIRED, []).append(_together(
            attempt, policy.topology_levels[job.slice_topology], {SLICE_LABEL: number}))
    return out or None


def _slice_of(job: Job, index: int) -> str | None:
    """The slice pod `index` of a sliced job is in (its `SLICE_LABEL`), by index."""
    return None if job.slice_size is None else str(index // job.slice_size)


def _gang_level(job: Job, policy: Policy) -> tuple[str, str] | None:
    """How the gang's pods must (`required`) or should (`preferred`) share a domain, and
    the level's node label: the job's `requiredTopology`, else its class's topology."""
    levels = policy.topology_levels
    if job.required_topology is not None:
        return "required", levels[job.required_topology]
    wanted = policy.classes[job.cls].topology
    return None if wanted is None else (wanted.mode, levels[wanted.level])


def _user_priority(pod: dict[str, Any], job: Job, policy: Policy) -> None:
    """What a user of a system without Airlock writes for the same pod: the PriorityClass
    of its class (the cluster has them anyway) and the GPU toleration."""
    pod["spec"]["priorityClassName"] = policy.classes[job.cls].priority_class.name
    pod["spec"]["tolerations"] = [dict(GPU_TOLERATION)]


def pods(system: System, attempt: Attempt, policy: Policy, speed: float = 1.0
         ) -> list[dict[str, Any]]:
    job, gang = attempt.job, attempt.job.pods > 1
    out = []
    for index in range(job.pods):
        pod = _pod(attempt, index)
        labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
        if system == "airlock":
            labels[CLASS_LABEL] = job.cls
            if gang:
                labels[GANG_NAME_LABEL] = attempt.group
            annotations.update(airlock_annotations(job, speed))
        else:
            _user_priority(pod, job, policy)
            if (affinity := model_affinity(job, policy)) is not None:
                pod["spec"]["affinity"] = affinity
        if system in ("stock", "coscheduling") and \
                (together := gang_affinity(attempt, index, policy)) is not None:
            pod["spec"].setdefault("affinity", {})["podAffinity"] = together
            if (number := _slice_of(job, index)) is not None:
                labels[SLICE_LABEL] = number
        if system == "coscheduling":
            pod["spec"]["schedulerName"] = COSCHEDULER
            if gang:
                labels[POD_GROUP_LABEL] = attempt.group
        if system == "kueue":
            labels[KUEUE_QUEUE_LABEL] = LOCAL_QUEUE
            if gang:
                labels[KUEUE_GROUP_LABEL] = attempt.group
                annotations[KUEUE_GROUP_COUNT] = str(job.pods)
                annotations.update(_kueue_topology(job, policy))
        out.append(pod)
    return out


def _kueue_topology(job: Job, policy: Policy) -> dict[str, str]:
    """The placement Airlock would give the job, in Kueue's words (`_gang_level`), and its
    slices' level and size."""
    out: dict[str, str] = {}
    if (wanted := _gang_level(job, policy)) is not None:
        mode, label = wanted
        out[KUEUE_TOPOLOGY[mode]] = label
    if job.slice_topology is not None:
        out |= {KUEUE_SLICE_TOPOLOGY: policy.topology_levels[job.slice_topology],
                KUEUE_SLICE_SIZE: str(job.slice_size)}
    return out


def pod_group(attempt: Attempt) -> dict[str, Any] | None:
    """The coscheduling PodGroup of a gang (None for a single pod): all of it, or an
    elastic job's minimum, must fit at once."""
    if attempt.job.pods < 2:
        return None
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": attempt.group, "namespace": attempt.job.namespace},
            "spec": {"minMember": attempt.job.least}}


def cluster_queue_name(team: str) -> str:
    return f"{team}-gpus"


def kueue_queues(namespaces: list[str], shape: Shape) -> list[dict[str, Any]]:
    """Kueue's objects for the cluster, as its docs set up Topology-Aware Scheduling and
    fair sharing: a Topology of the sandbox's levels; one ResourceFlavor of the GPU nodes
    on that topology; a Cohort holding every GPU; per namespace (a team), a ClusterQueue
    in the cohort with no quota of its own, so each team borrows from the cohort and fair
    sharing decides between them (preempting within a queue by priority, and reclaiming
    from teams above their share), and a LocalQueue."""
    def quota(gpus: int) -> list[dict[str, Any]]:
        return [{"coveredResources": [GPU], "flavors": [
            {"name": FLAVOR, "resources": [{"name": GPU, "nominalQuota": gpus}]}]}]

    out: list[dict[str, Any]] = [
        {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": TOPOLOGY},
         "spec": {"levels": [{"nodeLabel": label} for label in KUEUE_LEVELS]}},
        {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": FLAVOR},
         "spec": {"nodeLabels": {PRODUCT_LABEL: shape.product}, "topologyName": TOPOLOGY}},
        {"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": COHORT},
         "spec": {"resourceGroups": quota(shape.nodes * shape.gpus_per_node)}},
    ]
    for ns in namespaces:
        out += [
            {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
             "metadata": {"name": cluster_queue_name(ns)},
             "spec": {"cohortName": COHORT,
                      "namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": ns}},
                      "preemption": {"withinClusterQueue": "LowerPriority",
                                     "reclaimWithinCohort": "Any"},
                      "resourceGroups": quota(0)}},
            {"apiVersion": KUEUE_API, "kind": "LocalQueue",
             "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
             "spec": {"clusterQueue": cluster_queue_name(ns)}},
        ]
    return out
