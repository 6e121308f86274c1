"""Object builders for every test level and the benchmarks: a realistic Pod in one line,
varied with chained calls; gang members as users write them and as the webhook leaves
them; the controller's typed views of nodes and members; AdmissionReviews; policies (the
shipped one, and small ones built in Python); a clock the test moves."""

from __future__ import annotations

import copy
import dataclasses
import datetime
import functools
from collections.abc import Iterable
from typing import Any

import jsonpatch
import yaml

from tests.paths import POLICIES
from webhook.accelerators import Accelerators
from webhook.controller.core.actions import Action, events_of
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import Admit, Preempt, Wait
from webhook.controller.core.identities import UnitId
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.candidates import Candidates
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.preemption.planning import Preemptor
from webhook.controller.core.queues.quotas import Ledger, Quotas
from webhook.controller.core.records import PreemptionRecord, Record, Seal
from webhook.controller.shells.patches import record_patch, ungate_patch
from webhook.devices.pairing import paired
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CHECKPOINTED_AT_ANNOTATION,
    CLASS_LABEL,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    GATE,
    PLACEMENT_ANNOTATION,
    PREEMPTION_ANNOTATION,
    QUEUED_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    ClassName,
)
from webhook.policy.gpumodels import GpuModel
from webhook.policy.loading import load_policy
from webhook.policy.model import DEFAULT_ACCELERATORS, ClassSpec, Grant, Policy, Rule
from webhook.pools import COUNT_LABEL, PRODUCT_LABEL
from webhook.sandbox.devices import NIC_CLASS, resource_slices
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL

# The NVLink domain label: the sandbox's nodes carry it, the shipped policy's `nvlink`
# level names it, and the nodes built here carry it too.
CLIQUE = CLIQUE_LABEL
BLOCK = BLOCK_LABEL
GPU = "nvidia.com/gpu"
# An accelerator that is no GPU, which a policy has to name for the controller to count.
NEURON = "aws.amazon.com/neuron"
# The node selector of GPUs split into MIG slices under the GPU operator's mixed strategy.
MIXED = {"nvidia.com/mig.strategy": "mixed"}
NOW = 1_900_000_000.0
HOUR = 3600.0
SCAVENGER = 1000  # the default policy's scavenger priority
TRAINING = 50000  # and its training priority
# What the controller counts under a policy that names no accelerator.
POLICY_DEFAULT = Accelerators.of(DEFAULT_ACCELERATORS)
# The controller's record key in unit tests: records the builders write are sealed with
# it, and pods are parsed with it. It trusts no record without a seal (made at time 0).
SEAL = Seal(b"airlock-unit-tests-record-key-32", 0.0, lambda: NOW)


class Clock:
    """A clock the test moves, by setting `now`, given to what would read the real one."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class PodBuilder:
    def __init__(self, name: str = "worker-0", namespace: str = "ml") -> None:
        self.obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "containers": [{"name": "main", "image": "ghcr.io/acme/trainer:1.0"}],
            },
        }

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.obj["metadata"]
        return meta

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.obj["spec"]
        return spec

    def label(self, key: str, value: str) -> PodBuilder:
        self.meta.setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self.meta.setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, api_version: str = "batch/v1") -> PodBuilder:
        self.meta.setdefault("ownerReferences", []).append(
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
             "controller": True, "blockOwnerDeletion": True})
        return self

    def gpus(self, n: int | str, resource: str = "nvidia.com/gpu",
             limit: int | str | None = None) -> PodBuilder:
        res = self.spec["containers"][0].setdefault("resources", {})
        res.setdefault("requests", {})[resource] = str(n)
        res.setdefault("limits", {})[resource] = str(n if limit is None else limit)
        return self

    def cpu(self, cpu: str = "4", memory: str = "16Gi") -> PodBuilder:
        res = self.spec["containers"][0].setdefault("resources", {})
        res.setdefault("requests", {}).update({"cpu": cpu, "memory": memory})
        return self

    def resources(self, requests: dict[str, str] | None = None,
                  limits: dict[str, str] | None = None) -> PodBuilder:
        """Any resources on the first container; one with a limit and no request is
        requested at the limit (the apiserver's defaulting)."""
        res = self.spec["containers"][0].setdefault("resources", {})
        if requests:
            res.setdefault("requests", {}).update(requests)
        if limits:
            res.setdefault("limits", {}).update(limits)
        return self

    def image(self, image: str) -> PodBuilder:
        self.spec["containers"][0]["image"] = image
        return self

    def set(self, key: str, value: Any) -> PodBuilder:
        self.spec[key] = value
        return self

    def gate(self, name: str) -> PodBuilder:
        self.spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def gang(self, name: str, size: int) -> PodBuilder:
        """A gang member as a user writes it, with Airlock's own convention."""
        return self.label(GANG_NAME_LABEL, name).annotation(GANG_SIZE_ANNOTATION, str(size))

    def marked(self, gang: str, size: int | None, mode: str = "required",
               gated: bool = True) -> PodBuilder:
        """A gang member as the webhook leaves it: the gang label, the recorded size and
        topology, and the gate (unless it was lifted)."""
        self.label(GANG_LABEL, gang).annotation(TOPOLOGY_KEY_ANNOTATION, CLIQUE)
        self.annotation(TOPOLOGY_MODE_ANNOTATION, mode)
        if size is not None:
            self.annotation(GANG_EXPECTED_SIZE_ANNOTATION, str(size))
        if gated:
            self.gate(GATE)
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.obj)


def pod(name: str = "worker-0", namespace: str = "ml") -> PodBuilder:
    return PodBuilder(name, namespace)


def review(obj: Any, operation: str = "CREATE", old: Any = None, uid: str = "uid-1",
           username: str = "alice", namespace: str | None = None) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it."""
    ns = namespace if namespace is not None else (
        (obj or old or {}).get("metadata", {}).get("namespace", "ml")
        if isinstance(obj or old, dict) else "ml")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": ns,
            "operation": operation,
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


def gang_pod(gang: str, i: int, size: int, gpus: int = 8, cls: str | None = None,
             annotations: dict[str, str] | None = None,
             templates: tuple[str, ...] = (), image: str | None = None) -> dict[str, Any]:
    """A gang member as a user creates it, in whatever namespace the request names; with
    `templates`, its devices come from a claim made from each, and `gpus` is unused;
    `image`, what the rules may classify it by."""
    b = pod(f"{gang}-{i}").gang(gang, size)
    if image:
        b.image(image)
    for name in templates:
        claiming(b, template=name)
    if not templates:
        b.gpus(gpus)
    if cls:
        b.label(CLASS_LABEL, cls)
    for key, value in (annotations or {}).items():
        b.annotation(key, value)
    obj = b.build()
    del obj["metadata"]["namespace"]
    return obj


def raw_member(gang: str, i: int, gpus: int = 8, size: int | None = None, *,
               gated: bool = True, mode: str = "required", priority: int = 0,
               created: int = 0, ns: str = "ml", node_name: str | None = None,
               placement: Record | None = None, name: str | None = None,
               resource: str = GPU, recorded: str | None = None,
               marks: dict[str, str] | None = None, owned: bool = False,
               **spec: Any) -> dict[str, Any]:
    """A gang member as the watch delivers it once the webhook has marked it; `recorded`
    is the accelerators annotation the webhook wrote, `marks` more annotations it wrote
    (an elastic gang's minimum, a slice); `owned`: made by a Job named after the gang."""
    b = (pod(name or f"{gang}-{i}", ns).gpus(gpus, resource).cpu("8", "16Gi")
         .set("tolerations", [{"key": "nvidia.com/gpu", "operator": "Exists"}])
         .marked(gang, size, mode, gated))
    # Minutes and seconds past 10:00; a gang of 60 or more members runs into the next minute.
    b.meta["creationTimestamp"] = (datetime.datetime(2026, 11, 22, 10, tzinfo=datetime.UTC)
                                   + datetime.timedelta(minutes=created, seconds=i)
                                   ).strftime("%Y-%m-%dT%H:%M:%SZ")
    b.meta["uid"] = uid_of(ns, name or f"{gang}-{i}")
    if placement:
        b.annotation(PLACEMENT_ANNOTATION, SEAL.dumps(placement, b.meta["uid"]))
    if recorded is not None:
        b.annotation(ACCELERATORS_ANNOTATION, recorded)
    for key, value in (marks or {}).items():
        b.annotation(key, value)
    if priority:
        b.set("priority", priority)
    if node_name:
        b.set("nodeName", node_name)
    if owned:
        b.owner("Job", gang)
    for key, value in spec.items():
        b.set(key, value)
    return b.build()


def let_go(raw: dict[str, Any], record: Record, anchor: bool = False) -> PodInfo:
    """A gated pod as the applier leaves it, not bound yet: its gate lifted and the pod
    pinned as `record` says, with the record itself on the `anchor`."""
    info = PodInfo.parse(raw, SEAL)
    ops = (record_patch(info, record, SEAL) if anchor else []) + ungate_patch(info, record)
    return PodInfo.parse(jsonpatch.apply_patch(raw, ops), SEAL)


def uid_of(namespace: str, name: str) -> str:
    """The uid the builders give a pod."""
    return f"uid-{namespace}-{name}"


def victims_record(domain: str | None, victims: Iterable[PodInfo], nodes: Iterable[str],
                   at: float) -> PreemptionRecord:
    """A preemption as the controller records it, naming `victims` by name and uid."""
    pods = list(victims)
    return PreemptionRecord(domain, CLIQUE if domain else None,
                            tuple(f"{p.namespace}/{p.name}" for p in pods), tuple(nodes), at,
                            tuple(p.uid for p in pods))


def two_victims_record(at: float) -> PreemptionRecord:
    """A preemption recorded at `at` of ml/s-0 and ml/s-1 (the builders' uids), which ran
    on a-n0 and a-n1, in domain a."""
    return PreemptionRecord("a", CLIQUE, ("ml/s-0", "ml/s-1"), ("a-n0", "a-n1"), at,
                            (uid_of("ml", "s-0"), uid_of("ml", "s-1")))


def member(gang: str, i: int, gpus: int = 8, size: int | None = None, **kw: Any) -> PodInfo:
    return PodInfo.parse(raw_member(gang, i, gpus, size, **kw), SEAL)


def gang(name: str, n: int, gpus: int = 8, **kw: Any) -> list[PodInfo]:
    return [member(name, i, gpus, size=n, **kw) for i in range(n)]


def with_marks(pod: PodInfo, **marks: Any) -> PodInfo:
    """`pod` as if the webhook had marked it so (`Marks` fields: `runtime=60.0`)."""
    return dataclasses.replace(pod, marks=dataclasses.replace(pod.marks, **marks))


def with_records(pod: PodInfo, **records: Any) -> PodInfo:
    """`pod` as if the controller had recorded this on it (`Recorded` fields:
    `placement=record`), whether or not a seal would open it."""
    return dataclasses.replace(pod, recorded=dataclasses.replace(pod.recorded, **records))


def raw_queued(name: str, gpus: int = 1, *, ns: str = "ml", priority: int = SCAVENGER,
               created: int = 0, gated: bool = True, marks: dict[str, str] | None = None,
               **spec: Any) -> dict[str, Any]:
    """A single pod as the watch delivers it once the webhook queued it (its class queues
    single pods): the mark and, until the controller lifts it, the gate; `marks`, more
    annotations the webhook wrote (its expected run time)."""
    b = pod(name, ns).gpus(gpus).set("priority", priority).annotation(QUEUED_ANNOTATION,
                                                                      "true")
    b.meta["creationTimestamp"] = f"2026-11-22T10:{created:02d}:00Z"
    b.meta["uid"] = uid_of(ns, name)
    if gated:
        b.gate(GATE)
    for key, value in (marks or {}).items():
        b.annotation(key, value)
    for key, value in spec.items():
        b.set(key, value)
    return b.build()


def queued(name: str, gpus: int = 1, **kw: Any) -> PodInfo:
    return PodInfo.parse(raw_queued(name, gpus, **kw), SEAL)


def iso(at: float) -> str:
    """A Unix time as the API writes times (RFC 3339, seconds, UTC)."""
    return datetime.datetime.fromtimestamp(at, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _running(raw: dict[str, Any], node: str, ran: float, checkpointed: float | None
             ) -> PodInfo:
    meta = raw["metadata"]
    meta.setdefault("uid", uid_of(meta["namespace"], meta["name"]))
    raw["spec"]["nodeName"] = node
    raw["spec"].pop("schedulingGates", None)
    raw["status"] = {"phase": "Running", "startTime": iso(NOW - ran)}
    if checkpointed is not None:
        raw["metadata"].setdefault("annotations", {})[CHECKPOINTED_AT_ANNOTATION] = \
            iso(NOW - checkpointed)
    return PodInfo.parse(raw, SEAL)


def running(name: str, nodes: list[str], gpus: int = 8, ran: float = HOUR,
            priority: int = SCAVENGER, ns: str = "ml", checkpointed: float | None = None,
            minimum: int | None = None, size: int | None = None) -> list[PodInfo]:
    """A gang running one pod per node in `nodes` since `ran` seconds before NOW,
    checkpointed `checkpointed` seconds before NOW when given; with `minimum`, an elastic
    gang admitted with that minimum (recorded on its first pod), of `size` members (its
    running ones when not given; the rest, `elastic`'s, wait)."""
    size = size or len(nodes)

    def raw(i: int) -> dict[str, Any]:
        if minimum is None:
            return raw_member(name, i, gpus, size, priority=priority, ns=ns)
        record = Record(None, None, tuple(f"{name}-{j}" for j in range(len(nodes))),
                        NOW - ran, size, minimum=minimum)
        return raw_member(name, i, gpus, size, priority=priority, ns=ns,
                          marks={GANG_EXPECTED_MIN_ANNOTATION: str(minimum)},
                          placement=record if i == 0 else None, created=i)
    return [_running(raw(i), n, ran, checkpointed) for i, n in enumerate(nodes)]


def single(name: str, node: str, gpus: int = 1, ran: float = HOUR,
           priority: int = SCAVENGER, ns: str = "ml", queued: bool = False,
           owner: str | None = None, cls: str | None = None,
           priority_class: str | None = None) -> PodInfo:
    """A running pod in no gang; `queued`: one the webhook queued and the controller let go;
    `owner`: the kind of its controller (a ReplicaSet named after it); `cls`: its class
    label; `priority_class`: its PriorityClass's name."""
    raw = raw_queued(name, gpus, ns=ns, priority=priority, gated=False) if queued else \
        pod(name, ns).gpus(gpus).set("priority", priority).build()
    if owner is not None:
        raw["metadata"]["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner, "name": f"{name}-owner",
             "uid": f"uid-{name}-owner", "controller": True}]
    if cls is not None:
        raw["metadata"].setdefault("labels", {})[CLASS_LABEL] = cls
    if priority_class is not None:
        raw["spec"]["priorityClassName"] = priority_class
    return _running(raw, node, ran, None)


def node(name: str, domain: str | None, gpus: int = 8, resource: str = GPU, **extra: Any
         ) -> NodeInfo:
    labels = {"kubernetes.io/hostname": name, **extra.get("labels", {})}
    if domain:
        labels[CLIQUE] = domain
    raw = {"metadata": {"name": name, "labels": labels},
           "spec": {"taints": extra.get("taints", []),
                    "unschedulable": extra.get("unschedulable", False)},
           "status": {"allocatable": {resource: str(gpus), "cpu": "96",
                                      "memory": "1Ti", "pods": "110"},
                      "conditions": [{"type": "Ready",
                                      "status": extra.get("ready", "True")}]}}
    return NodeInfo.parse(raw)


def cluster(domains: dict[str, int], gpus: int = 8, resource: str = GPU) -> list[NodeInfo]:
    """`domains`: domain name -> number of nodes."""
    return [node(f"{d}-n{i}", d, gpus, resource) for d, count in domains.items()
            for i in range(count)]


def blocks(count: int, domains: int = 2, nodes: int = 4, gpus: int = 8) -> list[NodeInfo]:
    """`count` blocks of `domains` NVLink domains of `nodes` nodes each, as the sandbox
    labels them: block `b<i>`, domain `b<i>d<j>`, node `b<i>d<j>-n<k>`."""
    return [node(f"b{b}d{d}-n{n}", f"b{b}d{d}", gpus, labels={BLOCK: f"b{b}"})
            for b in range(count) for d in range(domains) for n in range(nodes)]


# GPU models as NVIDIA's GPU feature discovery labels their nodes.
PRODUCT = "nvidia.com/gpu.product"
PRODUCTS = {"h100": "NVIDIA-H100-80GB-HBM3", "a100": "NVIDIA-A100-SXM4-80GB",
            "l4": "NVIDIA-L4"}
GPU_MODELS = tuple(GpuModel(name=m, node_labels={PRODUCT: p}) for m, p in PRODUCTS.items())


def model_node(name: str, model: str, gpus: int = 8) -> NodeInfo:
    """A node of GPU `model`, in the NVLink domain of its model's nodes."""
    return node(name, model, gpus, labels={PRODUCT: PRODUCTS[model]})


def models_cluster(**counts: int) -> list[NodeInfo]:
    """`counts`: model -> number of 8-GPU nodes, named `<model>-n<i>`."""
    return [model_node(f"{m}-n{i}", m) for m, count in counts.items() for i in range(count)]


def tracked(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo] = (),
            accelerators: Accelerators = POLICY_DEFAULT) -> Tracked:
    """The cluster as the controller's watches would have reported it."""
    return Tracked.of(nodes, pods, accelerators)


def snapshot(nodes: Iterable[NodeInfo], pods: Iterable[PodInfo] = (),
             accelerators: Accelerators = POLICY_DEFAULT) -> Snapshot:
    return Snapshot(tracked(nodes, pods, accelerators))


def preemptor(cluster: Tracked, quotas: Quotas, now: float = NOW) -> Preemptor:
    """A round's preemption planner on the tracked cluster, under the default settings."""
    return Preemptor(Snapshot(cluster), Ledger(quotas, cluster.occupancy.namespace_gpus,
                                               cluster.capacity.total),
                     Candidates(cluster, quotas, now, PreemptionSettings()))


def unit(name: str, ns: str = "ml") -> UnitId:
    """A gang's unit id."""
    return UnitId("gang", ns, name)


def label(unit: UnitId) -> str:
    """How tests name a unit: a gang by its name, a queued single pod as `pod/NAME`."""
    return unit.name if unit.kind == "gang" else f"pod/{unit.name}"


def admitted(actions: list[Any]) -> dict[str, str | None]:
    return {label(a.unit): a.record.domain for a in actions if isinstance(a, Admit)}


def waits(actions: list[Any]) -> dict[str, str]:
    return {label(a.unit): a.message for a in actions if isinstance(a, Wait)}



def told(action: Action) -> str:
    """What an action's (first) event says."""
    return events_of(action)[0].message


def preempts(actions: list[Any]) -> list[Preempt]:
    return [a for a in actions if isinstance(a, Preempt)]


def policy_yaml(name: str, spec: dict[str, Any]) -> str:
    """One AirlockPolicy document, as a person would write it (block style)."""
    return yaml.safe_dump({"apiVersion": "gpu-airlock.io/v1alpha1", "kind": "AirlockPolicy",
                           "metadata": {"name": name}, "spec": spec}, sort_keys=False)


# --- workloads as people write them (explain expands them into pods) ---------------

def template(image: str = "ghcr.io/acme/trainer:1.0", gpus: int = 0,
             labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    """A pod template: one container, optionally with GPUs and template labels."""
    container: dict[str, Any] = {"name": "main", "image": image}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    out: dict[str, Any] = {"spec": {"containers": [container], **spec}}
    if labels:
        out["metadata"] = {"labels": dict(labels)}
    return out


def workload(api_version: str, kind: str, name: str = "w", namespace: str = "ml", /,
             **spec: Any) -> dict[str, Any]:
    """A workload object of any kind; `spec` fields as keyword arguments."""
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {"name": name, "namespace": namespace}, "spec": copy.deepcopy(spec)}


def indexed_job(name: str, pods: int, annotations: dict[str, str] | None = None,
                cls: str = "training", gpus: int = 8) -> dict[str, Any]:
    """An indexed Job of `pods` workers of `gpus` GPUs each, of class `cls`, as a user
    writes it: a gang as large as its parallelism."""
    pod_template = template(gpus=gpus, labels={CLASS_LABEL: cls})
    pod_template["metadata"]["annotations"] = dict(annotations or {})
    pod_template["spec"]["restartPolicy"] = "Never"
    return {"metadata": {"name": name},
            "spec": {"parallelism": pods, "completions": pods, "completionMode": "Indexed",
                     "template": pod_template}}


def replica_specs(**replicas: int | tuple[int, dict[str, Any]]) -> dict[str, Any]:
    """Training-operator replica specs: `Master=1, Worker=3`, or `(count, extra fields)`."""
    out: dict[str, Any] = {}
    for rtype, value in replicas.items():
        count, extra = value if isinstance(value, tuple) else (value, {})
        out[rtype] = {"replicas": count, "template": template(gpus=8), **extra}
    return out


CLASS_SPECS: dict[str, dict[str, Any]] = {
    "inference": {
        "priorityClass": {"name": "airlock-inference", "value": 100000},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "placement": "spread", "placementLevel": "host",
    },
    "training": {
        "priorityClass": {"name": "airlock-training", "value": 50000},
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                         "effect": "NoSchedule"}],
        "topology": {"level": "nvlink", "mode": "required"},
    },
    "scavenger": {
        "priorityClass": {"name": "airlock-scavenger", "value": 1000,
                          "preemptionPolicy": "Never"},
    },
}

RULES: list[dict[str, Any]] = [
    {"name": "serving-images", "class": "inference",
     "match": {"images": ["*vllm*", "*tritonserver*"]}},
    {"name": "kubeflow-training", "class": "training",
     "match": {"hasAnyLabel": ["training.kubeflow.org/job-name"]}},
    {"name": "lws", "class": "inference",
     "match": {"hasAnyLabel": ["leaderworkerset.sigs.k8s.io/name"]}},
    {"name": "gpu-deployments", "class": "inference",
     "match": {"ownerKinds": ["ReplicaSet", "StatefulSet"]}},
    {"name": "plain-jobs", "class": "scavenger",
     "match": {"ownerKinds": ["Job"], "inGang": False}},
]


def with_queued(policy: Policy, cls: ClassName, queued: bool) -> Policy:
    """`policy` with `classes.<cls>.queued` stated."""
    return policy.model_copy(update={"classes": {
        **policy.classes, cls: policy.classes[cls].model_copy(update={"queued": queued})}})


def with_grant(policy: Policy, cls: ClassName, namespaces: tuple[str, ...] = ()) -> Policy:
    """`policy` where `cls` requires a grant, granted to `namespaces`."""
    grants = (Grant.model_validate({"class": cls, "namespaces": namespaces}),) \
        if namespaces else ()
    return policy.model_copy(update={
        "classes": {**policy.classes,
                    cls: policy.classes[cls].model_copy(update={"requires_grant": True})},
        "grants": grants})


@functools.cache
def shipped_policy() -> Policy:
    """The default policy: policies/ as the repository ships it, loaded once."""
    return load_policy(POLICIES)


def make_policy(**overrides: Any) -> Policy:
    """A small policy built in Python, independent of the YAML in policies/."""
    parts: dict[str, Any] = {
        "topology_levels": {"nvlink": CLIQUE, "host": "kubernetes.io/hostname"},
        "classes": {k: ClassSpec.model_validate(v) for k, v in CLASS_SPECS.items()},
        "rules": tuple(Rule.model_validate(r) for r in RULES),
        **overrides,
    }
    return Policy(**parts)


# --- DRA: claims, templates and the slices that stand in for GPUs ------------------------

def claim_template(name: str, device_class: str = "gpu.nvidia.com", count: int = 8,
                   namespace: str = "ml", mode: str = "ExactCount",
                   selector: str | None = None) -> dict[str, Any]:
    """A ResourceClaimTemplate asking for `count` devices of `device_class`, those the
    CEL `selector` selects."""
    exactly: dict[str, Any] = {"deviceClassName": device_class, "allocationMode": mode}
    if mode == "ExactCount":
        exactly["count"] = count
    if selector is not None:
        exactly["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "devices",
                                                        "exactly": exactly}]}}}}


def resource_claim(name: str, device_class: str = "gpu.nvidia.com", count: int = 8,
                   namespace: str = "ml") -> dict[str, Any]:
    """A ResourceClaim of its own name, which several pods may share."""
    template = claim_template(name, device_class, count, namespace)
    return {**template, "kind": "ResourceClaim", "spec": template["spec"]["spec"]}


def claiming(builder: PodBuilder, template: str | None = None, claim: str | None = None
             ) -> PodBuilder:
    """The pod, claiming devices from a template (a claim made for it) or a named claim."""
    entry: dict[str, Any] = {"name": f"c{len(builder.spec.get('resourceClaims', []))}"}
    if template is not None:
        entry["resourceClaimTemplateName"] = template
    if claim is not None:
        entry["resourceClaimName"] = claim
    builder.spec.setdefault("resourceClaims", []).append(entry)
    builder.spec["containers"][0].setdefault("resources", {}).setdefault(
        "claims", []).append({"name": entry["name"]})
    return builder


def dra_pod(name: str, template: str, **spec: Any) -> dict[str, Any]:
    """A plain pod, no extended resource: its devices come from its claim alone. It
    tolerates the GPU taint itself (Airlock, which would, steps aside where it runs)."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "main", "image": "ghcr.io/acme/trainer:1.0",
                                     "resources": {"claims": [{"name": "devices"}]}}],
                     "resourceClaims": [{"name": "devices",
                                         "resourceClaimTemplateName": template}],
                     "tolerations": [{"key": GPU, "operator": "Exists",
                                      "effect": "NoSchedule"}], **spec}}


def dra_slice(node: str, gpus: int = 8, migs: int = 0, driver: str = "gpu.nvidia.com",
              generation: int = 1, name: str | None = None) -> dict[str, Any]:
    """A ResourceSlice of a node's GPUs (and MIG devices), as NVIDIA's driver writes one."""
    devices = [{"name": f"gpu-{i}", "attributes": {"type": {"string": "gpu"},
                                                   "index": {"int": i}}}
               for i in range(gpus)]
    devices += [{"name": f"mig-{i}", "attributes": {"type": {"string": "mig"}}}
                for i in range(migs)]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": name or f"{node}-{driver}-{generation}"},
            "spec": {"driver": driver, "nodeName": node, "devices": devices,
                     "pool": {"name": node, "generation": generation,
                              "resourceSliceCount": 1}}}


def gpu_nic_slices(node: str, gpus: int = 8, product: str = "NVIDIA-H100-80GB-HBM3"
                   ) -> list[dict[str, Any]]:
    """A node's slices as the `--dra` sandbox publishes them: its GPUs of the `product`
    GPU feature discovery would label, and an RDMA NIC beside each, two GPUs and their two
    NICs under each PCIe root."""
    return resource_slices({"metadata": {"name": node, "uid": f"uid-{node}", "labels": {
        PRODUCT_LABEL: product, COUNT_LABEL: str(gpus)}}})


def gpus_and_nics(name: str, count: int, aligned: bool = True, namespace: str = "ml"
                  ) -> dict[str, Any]:
    """A ResourceClaimTemplate asking for `count` GPUs and as many NICs; `aligned`: as the
    webhook rewrites it under the shipped policy, each GPU paired with its NIC."""
    template = claim_template(name, count=count, namespace=namespace)
    devices = template["spec"]["spec"]["devices"]
    devices["requests"] = [
        {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}},
        {"name": "nic", "exactly": {"deviceClassName": NIC_CLASS, "count": count}}]
    if aligned:
        rewritten, _ = paired(template["spec"]["spec"],
                              shipped_policy().device_kinds.values())
        template["spec"]["spec"]["devices"] = rewritten
    return template


def allocated_claim(name: str, devices: Iterable[tuple[str, str, str]], *,
                    template: dict[str, Any] | None = None, namespace: str = "ml"
                    ) -> dict[str, Any]:
    """A ResourceClaim (made from `template`, or asking for nothing of note) whose status
    says the scheduler allocated it these devices (driver, pool, device)."""
    spec = copy.deepcopy(template["spec"]["spec"]) if template else {"devices": {}}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": {"allocation": {"devices": {"results": [
                {"request": "r", "driver": d, "pool": p, "device": n}
                for d, p, n in devices]}}}}


def pool_entry(name: str = "h100", without: tuple[str, ...] = (), **fields: Any
               ) -> dict[str, Any]:
    """A pool as a pools file writes it: two H100 nodes of 8 GPUs, unless `fields` (in the
    file's spelling: gpusPerNode, nodesPerDomain, ...) say otherwise; no field `without`."""
    entry = {"name": name, "model": "h100", "count": 2, "gpusPerNode": 8, **fields}
    return {k: v for k, v in entry.items() if k not in without}


def preempting(n: int, record: PreemptionRecord, name: str = "train", ns: str = "ml"
               ) -> list[PodInfo]:
    """A training gang of `n` waiting, its anchor carrying the recorded preemption."""
    raws = [raw_member(name, i, 8, n, priority=TRAINING, ns=ns) for i in range(n)]
    raws[0]["metadata"]["annotations"][PREEMPTION_ANNOTATION] = SEAL.dumps(
        record, raws[0]["metadata"]["uid"])
    return [PodInfo.parse(r, SEAL) for r in raws]


def run_summary(utilization: float = 0.5, p99: float | None = 30.0,
                training_mean: float | None = 600.0, **fields: Any) -> dict[str, Any]:
    """One replay's figures as bench.peers writes them (the keys of `airlock simulate -o
    json`): two jobs done, a training class; `fields` replace top-level keys."""
    def figures(mean: float | None) -> dict[str, Any]:
        return {"jobs": 2, "completed": 2, "neverRunnable": 0, "stuck": 0,
                "wait": {"p50": 10.0, "p99": p99, "mean": mean}, "utilization": utilization,
                "gpuSeconds": 1000, "partialGangGpuSeconds": 0, "preemptions": 0,
                "backfilled": 0, "lostGpuSeconds": 0}

    return {"ended": "settled", "setupSeconds": 10.0, **figures(training_mean),
            "makespan": 100.0, "neverRunnableJobs": [], "partialGangJobs": {},
            "namespaces": {"ml": figures(training_mean)},
            "classes": {"training": figures(training_mean)}, **fields}
