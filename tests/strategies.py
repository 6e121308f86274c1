"""Hypothesis strategies over what reaches the webhook: pods as people and the workload
controllers write them (Jobs, Deployments' ReplicaSets, StatefulSets, PyTorchJobs,
JobSets, LeaderWorkerSets, RayClusters, Kueue and coscheduling pod groups, Airlock's own
gangs), pods with parts replaced by any JSON, AdmissionReviews around them, bodies that
are no review at all, and policies: the shipped ones or an example, with a generated
document on top.

One home for the server's fuzz tests (`tests/server/test_fuzz.py`, a short run in CI) and
the fuzz bench (`python -m bench.fuzz`, 100,000 reviews outside CI)."""

from __future__ import annotations

import base64
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import jsonpatch
import orjson
import yaml
from hypothesis import strategies as st

from tests.builders import pod, review
from tests.paths import POLICIES, POLICY_EXAMPLES
from webhook import keys
from webhook.operators.jobset import keys as jobset
from webhook.operators.kubeflow import keys as kubeflow
from webhook.operators.kuberay import keys as kuberay
from webhook.operators.kubernetes import keys as kube
from webhook.operators.kueue import keys as kueue
from webhook.operators.leaderworkerset import keys as lws
from webhook.operators.podgroup import keys as podgroup
from webhook.policy.loading import policy_files

Obj = dict[str, Any]

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)

# Namespaces the shipped policy and its examples name (excluded ones, teams' globs), and
# any other text: the apiserver checks names, but the webhook must not rely on it.
NAMESPACES = ("ml", "default", "serving-llm", "prod-chat", "research-nlp", "team-vision",
              "sandbox-7", "notebooks", "gpu-operator", "kube-system", keys.SYSTEM_NAMESPACE)
namespaces = st.sampled_from(NAMESPACES) | st.text(max_size=12)
names = st.sampled_from(("llama", "vllm-0", "w", "a" * 63, "a" * 64)) | st.text(max_size=16)
USERS = ("alice", keys.CONTROLLER_IDENTITY, "system:serviceaccount:kube-system:job-controller",
         "system:node:gpu-0001", "")
ACCELERATORS = ("nvidia.com/gpu", "amd.com/gpu", "gpu.intel.com/xe", "nvidia.com/mig-1g.10gb",
                "nvidia.com/gpu.shared", "aws.amazon.com/neuron")
RESOURCES = (*ACCELERATORS, "cpu", "memory", "ephemeral-storage")
# Quantities as the apiserver accepts them, and what it would refuse (a webhook may be
# called before validation, and by anything that can reach it).
quantities = (st.sampled_from(("0", "1", "2", "8", "16", "1.5", "500m", "4Gi", "1e3", "1k",
                               "-1", "", "abc", "9223372036854775808", "0.0001"))
              | st.integers(-1, 2**40).map(str) | st.integers(0, 16))
counts = (st.sampled_from(("0", "1", "2", "8", "64", "-3", "1.5", "", "x", "99999999999"))
          | st.integers(0, 300).map(str))
CLASS_VALUES = (*keys.CLASSES, "batch", "")
# Every key of Airlock's under its prefix: those people may write and Airlock's own marks,
# which the webhook strips or refuses.
AIRLOCK_KEYS = tuple(sorted(v for v in vars(keys).values()
                            if isinstance(v, str) and v.startswith(keys.PREFIX)
                            and v != keys.PREFIX))
TOPOLOGY_LABELS = ("nvidia.com/gpu.clique", "kubernetes.io/hostname",
                   "cloud.google.com/gce-topology-block")
# Values of every kind Airlock's keys hold: classes, counts, levels and node labels,
# quantities, run times (seconds and Go durations, good and bad), timestamps.
airlock_values = (st.sampled_from((*CLASS_VALUES, "true", "required", "preferred", "nvlink",
                                   "block", "host", "rack", *TOPOLOGY_LABELS, "0", "1", "2",
                                   "8", "0.25", "10Gi", "2h", "90m", "1h30m", "500ms", "0s",
                                   "-1", "2026-11-26T10:00:00Z"))
                  | st.text(max_size=12))
IMAGES = ("ghcr.io/acme/trainer:1.0", "vllm/vllm-openai:v0.6", "nvcr.io/nim/meta/llama3:1",
          "lmsysorg/sglang:latest", "busybox", "")
GATES = (keys.GATE, "kueue.x-k8s.io/admission", "example.com/wait")


def _owner(api_version: str, kind: str, name: str) -> Obj:
    return {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
            "controller": True, "blockOwnerDeletion": True}


class Member(NamedTuple):
    """Pod `i` of the `size` a workload called `name` makes."""

    name: str
    i: int
    size: int


# How each workload's controller writes its pods: controlling owner, labels, annotations.
Shape = tuple[Obj | None, dict[str, str], dict[str, str]]


def _job(m: Member) -> Shape:
    return (_owner("batch/v1", "Job", m.name),
            {kube.JOB_NAME_LABEL: m.name, kube.LEGACY_JOB_NAME: m.name,
             kube.CONTROLLER_UID: f"uid-{m.name}", kube.COMPLETION_INDEX: str(m.i)},
            {kube.COMPLETION_INDEX: str(m.i)})


def _replica_set(m: Member) -> Shape:
    return _owner("apps/v1", "ReplicaSet", f"{m.name}-6c75d865d6"), \
        {kube.POD_TEMPLATE_HASH: "6c75d865d6", "app": m.name}, {}


def _stateful_set(m: Member) -> Shape:
    return (_owner("apps/v1", "StatefulSet", m.name),
            {kube.STS_POD_NAME: f"{m.name}-{m.i}", kube.POD_INDEX: str(m.i),
             kube.REVISION_HASH: f"{m.name}-5d8f"}, {})


def _pytorch_job(m: Member) -> Shape:
    return (_owner("kubeflow.org/v1", "PyTorchJob", m.name),
            {kubeflow.JOB_NAME_LABEL: m.name, kubeflow.OPERATOR_NAME: "pytorchjob-controller",
             kubeflow.REPLICA_TYPE: "master" if m.i == 0 else "worker",
             kubeflow.REPLICA_INDEX: str(m.i)}, {})


def _jobset(m: Member) -> Shape:
    # A JobSet's pods belong to its child Jobs, and carry its labels as annotations too.
    marks = {jobset.JOBSET_LABEL: m.name, jobset.REPLICATED_JOB_LABEL: "workers",
             jobset.JOB_INDEX: str(m.i), jobset.JOB_GLOBAL_INDEX: str(m.i),
             jobset.REPLICATED_JOB_REPLICAS: str(m.size), jobset.GLOBAL_REPLICAS: str(m.size),
             jobset.JOB_KEY: f"key-{m.name}"}
    return _owner("batch/v1", "Job", f"{m.name}-workers-{m.i}"), marks, dict(marks)


def _leader_worker_set(m: Member) -> Shape:
    return (_owner("apps/v1", "StatefulSet", f"{m.name}-0"),
            {lws.NAME_LABEL: m.name, lws.GROUP_INDEX_LABEL: "0", lws.WORKER_INDEX: str(m.i)},
            {lws.SIZE_ANNOTATION: str(m.size)})


def _ray_cluster(m: Member) -> Shape:
    return (_owner(kuberay.API_VERSION, "RayCluster", m.name),
            {kuberay.CLUSTER_LABEL: m.name, kuberay.NODE_TYPE: "head" if m.i == 0 else "worker",
             kuberay.GROUP_LABEL: "gpu-workers"}, {})


def _kueue_group(m: Member) -> Shape:
    return None, {kueue.GROUP_LABEL: m.name}, {kueue.TOTAL_ANNOTATION: str(m.size)}


def _pod_group(m: Member) -> Shape:
    return None, {podgroup.POD_GROUP_LABEL: m.name}, {}


def _bare(_: Member) -> Shape:
    return None, {}, {}


WORKLOADS: tuple[Callable[[Member], Shape], ...] = (
    _job, _replica_set, _stateful_set, _pytorch_job, _jobset, _leader_worker_set,
    _ray_cluster, _kueue_group, _pod_group, _bare)


# Strategies are built once, here, not inside the composites: building one per draw
# costs more than drawing from it.
_requests = st.dictionaries(st.sampled_from(RESOURCES), quantities, max_size=3)
_limits = st.dictionaries(st.sampled_from(RESOURCES), quantities, max_size=2)
_images = st.sampled_from(IMAGES)
_sizes = st.integers(1, 16)
_container_counts = st.integers(0, 3)


@st.composite
def _resources(draw: st.DrawFn) -> Obj:
    requests = draw(_requests)
    # Extended resources are often given as limits only: the apiserver copies them.
    limits = requests if draw(st.booleans()) else draw(_limits)
    out: Obj = {"requests": requests} if requests else {}
    if limits:
        out["limits"] = limits
    if draw(st.booleans()):
        out["claims"] = [{"name": "gpus"}]
    return out


_resources_of = _resources()


@st.composite
def _containers(draw: st.DrawFn, prefix: str) -> list[Obj]:
    """One to three containers (`c0`, ...), or zero to three init containers."""
    out = []
    for i in range(draw(_container_counts) or int(prefix == "c")):
        container: Obj = {"name": f"{prefix}{i}", "image": draw(_images),
                          "resources": draw(_resources_of)}
        if prefix == "init" and draw(st.booleans()):
            container["restartPolicy"] = "Always"  # a sidecar: it runs beside the others
        out.append(container)
    return out


_claims = st.lists(st.sampled_from((
    {"name": "gpus", "resourceClaimTemplateName": "eight-gpus"},
    {"name": "gpus", "resourceClaimName": "shared-gpus"},
    {"name": "channel", "resourceClaimTemplateName": "imex-channel"},
    {"name": "gpus"})), max_size=2)
_tolerations = st.lists(st.fixed_dictionaries(
    {"key": st.sampled_from(("nvidia.com/gpu", "", "dedicated"))},
    optional={"operator": st.sampled_from(("Exists", "Equal")),
              "value": st.sampled_from(("true", "gpu")),
              "effect": st.sampled_from(("NoSchedule", "NoExecute", ""))}), max_size=3)
_expressions = st.lists(st.fixed_dictionaries({
    "key": st.sampled_from(TOPOLOGY_LABELS),
    "operator": st.sampled_from(("In", "NotIn", "Exists")),
    "values": st.lists(st.sampled_from(("clique-0", "gpu-0001", "block-1")), max_size=2)}),
    min_size=1, max_size=2)
_affinity = st.fixed_dictionaries({}, optional={
    "nodeAffinity": st.fixed_dictionaries({}, optional={
        "requiredDuringSchedulingIgnoredDuringExecution": _expressions.map(
            lambda e: {"nodeSelectorTerms": [{"matchExpressions": e}]}),
        "preferredDuringSchedulingIgnoredDuringExecution": _expressions.map(
            lambda e: [{"weight": 50, "preference": {"matchExpressions": e}}])}),
    "podAntiAffinity": st.just({"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "kubernetes.io/hostname",
         "labelSelector": {"matchLabels": {"app": "vllm"}}}]})})
# PriorityClasses of every kind a pod may name: Airlock's, Kubernetes' own, a team's, any.
PRIORITY_CLASSES = ("airlock-training", "airlock-inference", "airlock-scavenger",
                    "airlock-placeholder", "system-cluster-critical", "system-node-critical",
                    "team-high", "")
_priority_classes = st.sampled_from(PRIORITY_CLASSES) | st.text(max_size=12)
_spec_extras = st.fixed_dictionaries({}, optional={
    "initContainers": _containers("init"),
    "resourceClaims": _claims,
    "tolerations": _tolerations,
    "affinity": _affinity,
    "nodeSelector": st.dictionaries(st.sampled_from(TOPOLOGY_LABELS),
                                    st.sampled_from(("clique-0", "gpu-0001")), max_size=2),
    "schedulingGates": st.lists(st.sampled_from(GATES).map(lambda g: {"name": g}), max_size=2),
    "priorityClassName": _priority_classes,
    "priority": st.integers(-(2**31), 2**31 - 1),
    "schedulerName": st.sampled_from((keys.DEFAULT_SCHEDULER, "volcano", "")),
    "preemptionPolicy": st.sampled_from(("Never", "PreemptLowerPriority")),
    "nodeName": st.just("gpu-0001"),
    "activeDeadlineSeconds": st.sampled_from((1, 600, 0, -5, "600", True)),
})


_gang_names = st.sampled_from(("", "g" * 64))
_classes_or_not = st.sampled_from(CLASS_VALUES)
# Kueue's pod-set annotations, which the webhook reads as topology asks.
KUEUE_PODSET_KEYS = (kueue.REQUIRED_TOPOLOGY, kueue.PREFERRED_TOPOLOGY,
                     kueue.SLICE_REQUIRED_TOPOLOGY, kueue.SLICE_SIZE)
_extra_keys = st.lists(st.tuples(st.sampled_from((*AIRLOCK_KEYS, *KUEUE_PODSET_KEYS))
                                 | st.text(max_size=10).map(keys.PREFIX.__add__),
                                 airlock_values), max_size=4)


def _gang_marks(draw: st.DrawFn, name: str) -> tuple[dict[str, str], dict[str, str]]:
    """Airlock's own gang convention, its class label, any other key under its prefix and
    Kueue's pod-set annotations, meaningful or not."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        labels[keys.GANG_NAME_LABEL] = name if draw(st.booleans()) else draw(_gang_names)
        annotations[keys.GANG_SIZE_ANNOTATION] = draw(counts)
        if draw(st.booleans()):
            annotations[keys.GANG_MIN_SIZE_ANNOTATION] = draw(counts)
    if draw(st.booleans()):
        labels[keys.CLASS_LABEL] = draw(_classes_or_not)
    for key, value in draw(_extra_keys):
        (labels if draw(st.booleans()) else annotations)[key] = value
    return labels, annotations


_workloads = st.sampled_from(WORKLOADS)
_main_containers = _containers("c")


@st.composite
def workload_pods(draw: st.DrawFn) -> Obj:
    """A pod as a workload's controller (or a person) writes it: the owner and labels of
    one of `WORKLOADS`, gang marks, containers asking for accelerators, claims,
    tolerations, affinity, gates."""
    name, size = draw(names), draw(_sizes)
    i = draw(_sizes) % size
    owner, labels, annotations = draw(_workloads)(Member(name, i, size))
    gang_labels, gang_annotations = _gang_marks(draw, name)
    obj = pod(f"{name}-{i}", draw(namespaces)).build()
    if draw(st.booleans()):
        del obj["metadata"]["namespace"]  # pods of a controller: the review names it
    meta = obj["metadata"]
    for key, value in (("ownerReferences", [owner] if owner else None),
                       ("labels", labels | gang_labels),
                       ("annotations", annotations | gang_annotations)):
        if value:
            meta[key] = value
    obj["spec"] = {"containers": draw(_main_containers), **draw(_spec_extras)}
    return obj


# Realistic pods to damage: any field may hold any JSON.
BASE_PODS = [
    pod().gpus(8).label(kubeflow.JOB_NAME_LABEL, "llama").build(),
    pod().gpus(1).owner("ReplicaSet", "web-1", "apps/v1").build(),
    pod().gpus(2).gang("g", 2).build(),
    pod().cpu().build(),
]
POD_FIELDS = [
    ("metadata", "labels"), ("metadata", "annotations"), ("metadata", "ownerReferences"),
    ("metadata", "namespace"), ("metadata", "name"), ("spec", "containers"),
    ("spec", "initContainers"), ("spec", "schedulingGates"), ("spec", "tolerations"),
    ("spec", "affinity"), ("spec", "nodeSelector"), ("spec", "priority"),
    ("spec", "priorityClassName"), ("spec", "schedulerName"), ("spec", "preemptionPolicy"),
    ("spec", "topologySpreadConstraints"), ("spec", "resourceClaims"),
]


_damaged_fields = st.lists(st.sampled_from(POD_FIELDS), max_size=3)


_base_pods = st.sampled_from(BASE_PODS)


@st.composite
def damaged_pods(draw: st.DrawFn, bases: st.SearchStrategy[Obj] = _base_pods) -> Obj:
    """A pod of `bases` with up to three of its fields replaced by any JSON value."""
    obj: Obj = orjson.loads(orjson.dumps(draw(bases)))
    for section, key in draw(_damaged_fields):
        if not isinstance(obj.get(section), dict):
            obj[section] = {}
        obj[section][key] = draw(json_values)
    return obj


pods = workload_pods() | damaged_pods(workload_pods() | _base_pods)


# --- hostile values -----------------------------------------------------------------

# What an attacker writes where Airlock reads a number, a duration, a share, an amount or
# an instant: numbers and exponents far beyond any use, negatives, digits of other scripts,
# ratios by zero, durations past a year, instants past the calendar, text that is almost a
# number.
HOSTILE_TEXTS = (
    "1e-200000000", "1e200000000", "-1e200000000", "1E+999999999", "1e-999999999",
    "9" * 5000, "-" + "9" * 5000, "0." + "0" * 4000 + "1", "1" + "0" * 4400 + "Ki",
    "1/0", "0/0", "99999999/1", "1/" + "9" * 50, "nan", "inf", "-inf", "Infinity", "-1", "-0",
    "0", "\u0661\u0662", "\uff18", "\u00b2", "\U0001d7d7", "\u216b", "\u0663\u066b\u0665",
    "9999999999999999999h", "1e9h", "0.000000001ns", "1h" * 2000, "9" * 40 + "h",
    "2562047h47m16.854775808s", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00+23:59",
    "2026-11-28T08:00:00.999999999999999999Z", "9Ei", "1e18E", "999999999999Pi", "0x10",
    "1_000", " 1 ", "1\x00", "")
hostile_values = (
    st.sampled_from(HOSTILE_TEXTS)
    | st.integers(41, 6000).map(lambda n: "9" * n)
    | st.builds(lambda sign, digit, e, exponent: f"{sign}{digit}{e}{exponent}",
                st.sampled_from(("", "-", "+")), st.integers(0, 9), st.sampled_from("eE"),
                st.integers(-(10**9), 10**9))
    | st.builds(lambda n, unit: f"{n}{unit}", st.integers(-(2**70), 2**70),
                st.sampled_from(("", "m", "Ki", "Gi", "Ei", "E", "h", "m30s", "ns", "/7")))
    | st.text(st.characters(categories=("Nd", "No", "Nl")), min_size=1, max_size=12))
# Every key whose value Airlock reads: its own (users' keys and its marks), the operators'
# sizes and indices, Kueue's pod-set asks.
HOSTILE_KEYS = (*AIRLOCK_KEYS, *KUEUE_PODSET_KEYS, kueue.TOTAL_ANNOTATION, lws.SIZE_ANNOTATION,
                kube.COMPLETION_INDEX)
_hostile_keys = st.lists(st.sampled_from(HOSTILE_KEYS), min_size=1, max_size=4, unique=True)
_hostile_spec = st.fixed_dictionaries({}, optional={
    "schedulingGates": st.lists(st.sampled_from(GATES) | st.text(min_size=1, max_size=12),
                                min_size=1, max_size=3).map(
        lambda gates: [{"name": g} for g in gates]),
    "nodeName": st.sampled_from(("gpu-0001",)) | st.text(min_size=1, max_size=12),
    "priorityClassName": _priority_classes,
    "priority": st.integers(-(2**31), 2**31 - 1),
    "activeDeadlineSeconds": st.integers(-(2**63), 2**63 - 1),
})


@st.composite
def hostile_pods(draw: st.DrawFn) -> Obj:
    """A GPU pod as a workload writes it, with hostile values in one to four of the keys
    Airlock reads, as labels or annotations; perhaps a hostile GPU quantity, another
    system's gates, a node name, any PriorityClass and priority, any deadline."""
    obj = draw(workload_pods())
    meta = obj["metadata"]
    for key in draw(_hostile_keys):
        meta.setdefault("labels" if draw(st.booleans()) else "annotations", {})[key] = \
            draw(hostile_values)
    resources = obj["spec"]["containers"][0].setdefault("resources", {})
    quantity = draw(hostile_values) if draw(st.booleans()) else "1"
    for section in ("requests", "limits"):
        resources.setdefault(section, {})["nvidia.com/gpu"] = quantity
    obj["spec"].update(draw(_hostile_spec))
    return obj


_edits = st.lists(st.sampled_from(("ungate", "gate", "class", "bind")), max_size=2,
                  unique=True)
_operations = st.sampled_from(("CREATE", "CREATE", "UPDATE", "DELETE", "CONNECT"))
_users = st.sampled_from(USERS)
_uids = st.sampled_from(("uid-1", "0b7a2c4e-9f1d-4e55-8a3c-2d1b6f0e9a71")) \
    | st.text(min_size=1, max_size=12)


def _edited(draw: st.DrawFn, obj: Obj) -> Obj:
    """The pod after an update: gates lifted or added, relabelled, bound to a node."""
    new: Obj = orjson.loads(orjson.dumps(obj))
    spec = new.setdefault("spec", {}) if isinstance(new.get("spec", {}), dict) else {}
    meta = new.setdefault("metadata", {}) if isinstance(new.get("metadata", {}), dict) else {}
    for edit in draw(_edits):
        if edit == "ungate":
            spec.pop("schedulingGates", None)
        elif edit == "gate":
            spec["schedulingGates"] = [{"name": keys.GATE}]
        elif edit == "class":
            if not isinstance(meta.get("labels"), dict):
                meta["labels"] = {}
            meta["labels"][keys.CLASS_LABEL] = draw(_classes_or_not)
        else:
            spec["nodeName"] = "gpu-0002"
    return new


@st.composite
def reviews(draw: st.DrawFn, objects: st.SearchStrategy[Obj] = pods) -> Obj:
    """An AdmissionReview of a pod, as the apiserver sends it, for any operation and user:
    an UPDATE's object is the old one edited, a DELETE has only the old one."""
    obj = draw(objects)
    operation = draw(_operations)
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    namespace = ns if isinstance(ns, str) and draw(st.booleans()) else draw(namespaces)
    new, old = (_edited(draw, obj), obj) if operation == "UPDATE" else \
        (None, obj) if operation == "DELETE" else (obj, None)
    out = review(new, operation=operation, old=old, username=draw(_users), uid=draw(_uids),
                 namespace=namespace)
    out["request"]["dryRun"] = draw(st.booleans())
    return out


_odd_parts = st.sampled_from((
    ("request", "object"), ("request", "oldObject"), ("request", "uid"),
    ("request", "operation"), ("request", "userInfo"), ("request", "namespace"),
    ("request", "kind"), ("request",), ("apiVersion",), ("kind",)))
# Nesting as deep as orjson writes inside a review (255 levels in all).
_deep = st.integers(1, 250).map(lambda depth: orjson.loads(b"[" * depth + b"]" * depth))


@st.composite
def odd_reviews(draw: st.DrawFn) -> Obj:
    """A review of a realistic pod with one part (the object, the whole request, a field
    of it, the envelope's apiVersion or kind) replaced by any JSON value."""
    out = review(pod().gpus(1).build())
    *path, last = draw(_odd_parts)
    holder = out
    for key in path:
        holder = holder[key]
    holder[last] = draw(json_values | _deep)
    return out


_review_bytes = reviews().map(orjson.dumps)
# A GPU pod's review with a hole where a value nested `depth` levels deep goes (the object,
# its affinity or a label value), written as bytes: orjson reads 1,024 levels, more than
# it writes and about as many as Python's recursion limit.
_HOLE = b"<hole>"
_DEEP_SLOTS = tuple(orjson.dumps(review(obj)).replace(b'"<hole>"', _HOLE) for obj in (
    _HOLE.decode(), pod().gpus(8).set("affinity", _HOLE.decode()).build(),
    pod().gpus(1).label("app", _HOLE.decode()).build()))
_deep_bytes = st.tuples(st.sampled_from(_DEEP_SLOTS), st.integers(200, 1100)).map(
    lambda t: t[0].replace(_HOLE, b"[" * t[1] + b"]" * t[1]))
malformed_bodies = st.one_of(
    st.binary(max_size=512),
    st.tuples(_review_bytes, st.floats(0, 1)).map(lambda t: t[0][:int(len(t[0]) * t[1])]),
    _review_bytes.map(lambda b: b.replace(b'"Pod"', b'"P\xffd"', 1)),
    st.integers(1, 3000).map(lambda depth: b"[" * depth + b"]" * depth),
    _deep_bytes,
    st.sampled_from((b"", b"null", b"[]", b'"AdmissionReview"', b"NaN",
                     b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", '
                     b'"request": {"uid": "u", "operation": "CREATE", "object": '
                     b"123456789012345678901234567890}}")),
)
"""Bytes that are no AdmissionReview, or hardly one: random, a review cut short or with
bad UTF-8, nesting as deep as the parser takes and deeper, JSON of the wrong shape, a
number no int holds."""


# --- what must come back --------------------------------------------------------------

# The webhook's own error, answered inside a 200 with the review's status.code 500.
FAILED = "the webhook failed"


def answer_problem(status: int, body: bytes, uid: str | None) -> str | None:
    """What is wrong with the webhook's answer to a review body, or None: it must be an
    HTTP 400 that says why, or an AdmissionReview whose response answers `uid` (when the
    review had a usable one), allowed or denied with a message but not failed (the
    webhook's own errors come back as a 200 with status.code 500), with any patch a JSON
    Patch."""
    if status == 400:
        return None if body.strip() else "a 400 that does not say why"
    if status != 200:
        return f"HTTP {status}"
    try:
        resp = orjson.loads(body)["response"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return "a 200 that is no AdmissionReview"
    if not isinstance(resp, dict) or not isinstance(resp.get("allowed"), bool):
        return "a response without allowed"
    if uid is not None and resp.get("uid") != uid:
        return f"the response answers uid {resp.get('uid')!r}, not {uid!r}"
    outcome = resp.get("status") or {}
    if isinstance(outcome.get("code"), int) and outcome["code"] >= 500:
        return f"{FAILED}: {outcome.get('message')!r}"
    if not resp["allowed"] and not outcome.get("message"):
        return "a denial without a message"
    if "patch" in resp and resp.get("patchType") != "JSONPatch":
        return f"a patch of type {resp.get('patchType')!r}"
    return None


def patched(obj: Any, body: bytes) -> Any:
    """`obj` with the patch of the answer `body` applied (a copy), or None when the answer
    has none; PatchError when it does not apply."""
    resp = orjson.loads(body)["response"]
    if "patch" not in resp:
        return None
    try:
        return jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(resp["patch"])))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, ValueError,
            TypeError, KeyError, IndexError) as e:
        raise PatchError(f"{type(e).__name__}: {e}") from None


class PatchError(ValueError):
    """A patch that does not apply to the object it was computed for."""


# --- policies -----------------------------------------------------------------------

# Complete policies (the shipped one and the examples that stand alone), and the examples
# that add to one.
BASES = (POLICIES, *sorted(p.parent for p in POLICY_EXAMPLES.glob("*/policy.yaml")))
OVERLAYS = (POLICY_EXAMPLES / "team-namespaces", POLICY_EXAMPLES / "time-slicing")
LABEL_KEYS = (kubeflow.JOB_NAME_LABEL, jobset.JOBSET_LABEL, kube.JOB_NAME_LABEL,
              lws.NAME_LABEL, kuberay.CLUSTER_LABEL, "app", keys.GANG_NAME_LABEL)
OWNER_KINDS = ("Job", "ReplicaSet", "StatefulSet", "PyTorchJob", "RayCluster")
GLOBS = ("ml", "default", "serving-*", "prod-*", "fuzz-*", "team-?ision", "*")
_globs = st.lists(st.sampled_from(GLOBS), min_size=1, max_size=3, unique=True)
_classes = st.sampled_from(keys.CLASSES)
_match = st.fixed_dictionaries({}, optional={
    "labels": st.dictionaries(st.sampled_from(LABEL_KEYS), st.sampled_from(("llama", "w")),
                              max_size=1),
    "hasAnyLabel": st.lists(st.sampled_from(LABEL_KEYS), min_size=1, max_size=2),
    "lacksLabels": st.lists(st.sampled_from(LABEL_KEYS), min_size=1, max_size=1),
    "annotations": st.just({keys.GANG_SIZE_ANNOTATION: "8"}),
    "hasAnyAnnotation": st.just([keys.GPU_FRACTION_ANNOTATION]),
    "ownerKinds": st.lists(st.sampled_from(OWNER_KINDS), min_size=1, max_size=2),
    "images": st.lists(st.sampled_from(("*vllm*", "busybox", "ghcr.io/acme/*")), min_size=1,
                       max_size=2),
    "namespaces": _globs,
    "requests": st.lists(st.sampled_from(ACCELERATORS), min_size=1, max_size=2),
    "inGang": st.booleans(),
})


@st.composite
def _queues(draw: st.DrawFn) -> list[Obj]:
    # A namespace is named by one queue only: each glob goes to one queue at most.
    globs = draw(st.permutations(("ml", "default", "serving-*", "prod-*", "fuzz-*")))
    out = []
    for i in range(draw(st.integers(1, 3))):
        nominal = draw(st.integers(0, 64))
        queue: Obj = {"name": f"fuzz-q{i}", "namespaces": [globs[i]],
                      "nominal": {"nvidia.com/gpu": nominal},
                      "weight": draw(st.sampled_from((0.5, 1, 2)))}
        if draw(st.booleans()):
            queue["lendingLimit"] = {"nvidia.com/gpu": draw(st.integers(0, nominal))}
        if draw(st.booleans()):
            queue["borrowingLimit"] = {"nvidia.com/gpu": draw(st.integers(0, 64))}
        out.append(queue)
    return out


@st.composite
def policy_documents(draw: st.DrawFn, queues: bool = True) -> Obj:
    """An AirlockPolicy document that adds to a complete policy: rules (which an earlier
    file's rules precede), grants, namespace access, queues, scope and gate removers."""
    rules = [{"name": f"fuzz-rule-{i}", "class": draw(_classes), "match": draw(_match)}
             for i in range(draw(st.integers(0, 3)))]
    spec = draw(st.fixed_dictionaries({}, optional={
        "grants": st.lists(st.fixed_dictionaries({"class": _classes, "namespaces": _globs}),
                           min_size=1, max_size=2),
        "namespaceAccess": st.lists(st.fixed_dictionaries({
            "namespaces": _globs,
            "classes": st.lists(_classes, min_size=1, max_size=3, unique=True)}),
            min_size=1, max_size=2),
        "scope": st.fixed_dictionaries({}, optional={
            "excludedNamespaces": st.lists(st.sampled_from(NAMESPACES), max_size=2),
            "schedulers": st.lists(st.sampled_from(("volcano", "")), max_size=1)}),
        "admission": st.fixed_dictionaries({"gateRemovers": st.lists(
            st.sampled_from(USERS[:3]), max_size=2)}),
        **({"queues": _queues()} if queues else {}),
    }))
    if rules:
        spec["rules"] = rules
    return {"apiVersion": keys.API_VERSION, "kind": "AirlockPolicy",
            "metadata": {"name": "fuzz"}, "spec": spec}


@dataclass(frozen=True)
class GeneratedPolicy:
    """A complete policy, examples that add to it, and a generated document last."""

    base: Path
    overlays: tuple[Path, ...]
    document: Obj

    def write(self, directory: Path) -> Path:
        """The policy directory, as the webhook reads it."""
        directory.mkdir(parents=True, exist_ok=True)
        for source in (self.base, *self.overlays):
            for f in policy_files(source):
                shutil.copy(f, directory / f.name)
        (directory / "90-fuzz.yaml").write_text(yaml.safe_dump(self.document, sort_keys=False))
        return directory

    def describe(self) -> str:
        spec = self.document["spec"]
        parts = [self.base.name, *(o.name for o in self.overlays)]
        return " + ".join(parts) + f" + fuzz ({', '.join(spec) or 'empty'})"


@st.composite
def policies(draw: st.DrawFn) -> GeneratedPolicy:
    overlays = tuple(draw(st.lists(st.sampled_from(OVERLAYS), max_size=2, unique=True)))
    # The team-namespaces example brings its queues; generated ones would name the same
    # namespaces twice.
    document = draw(policy_documents(queues=OVERLAYS[0] not in overlays))
    return GeneratedPolicy(draw(st.sampled_from(BASES)), overlays, document)
