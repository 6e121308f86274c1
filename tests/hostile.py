"""Hypothesis strategies over what a tenant who may edit one namespace creates through the
apiserver to take Airlock's controller down for everyone: pods and the workloads that make
them (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs, CronJobs), budgets and
claim templates, carrying hostile values under every Airlock key — users' keys, and
Airlock's own marks, which survive on pods the webhook never sees (no accelerator, no
class: a busybox pod) — foreign scheduling gates, `nodeName`, requests no node meets
(`cpu: 100000`, a node selector nothing matches), and gangs that never complete.

tests/strategies.py draws what reaches the webhook, stored or not; these draw objects the
apiserver stores: names, label values and quantities are valid where the apiserver checks
them, and what is hostile is what it does not check (annotations' text, the size and
spelling of numbers, the scale of requests). One home for the controller fuzz
(`python -m bench.fuzz --controller`) and the unit test that holds a round to them
(tests/unit/test_controller_fuzz.py)."""

from __future__ import annotations

from typing import Any, NamedTuple

from hypothesis import strategies as st

from tests.strategies import AIRLOCK_KEYS
from webhook import keys
from webhook.accelerators import extended
from webhook.sandbox.nodes import CLIQUE_LABEL
from webhook.sandbox.stages import DELAY

Obj = dict[str, Any]

# The controller's records are refused at creation, by the apiserver and the webhook alike
# (tests/e2e/test_security.py holds that): drawn here, they would only be refused.
RECORDS = (keys.PLACEMENT_ANNOTATION, keys.PREEMPTION_ANNOTATION)
MARK_KEYS = tuple(k for k in AIRLOCK_KEYS if k not in RECORDS)
LABEL_KEYS = frozenset({keys.CLASS_LABEL, keys.GANG_NAME_LABEL, keys.GANG_LABEL,
                        keys.LEGACY_GANG_LABEL, keys.PLACEHOLDER_LABEL,
                        keys.IGNORE_NAMESPACE_LABEL})

# Numbers no honest pod writes: past int()'s 4,300 digits, past every bound, negative,
# with exponents, in digits that are not ASCII, or no number at all; and honest ones.
NUMBERS = ("0", "1", "2", "8", "64", "100000", "100001", "-1", "-0", "+8", " 8", "8\n",
           "1.5", "1e9", "1E400", "1e-400", "0x10", "1_000", "²", "٣", "\uff11\uff16", "∞", "NaN",
           "inf", "", " ")
DURATIONS = ("2h", "90m", "1h30m", "15s", "0s", "-5m", "1e400s", "9999999h", "PT1H", "1.5.5h",
             "٣h", "h", "1µs", "1ns", "3600")
INSTANTS = ("2026-11-28T08:00:00Z", "9999-12-31T23:59:59Z", "0001-01-01T00:00:00Z",
            "2026-11-28T08:00:00+99:00", "2026-02-30T00:00:00Z", "yesterday")
AMOUNTS = ("10Gi", "80G", "1e400000000", "-10Gi", "0", "0.0000001", "10Ei", "1/0", "0/1",
           "0.25", "1/8", "99999/1", "0.0625")
TOPOLOGY = ("nvlink", "block", "host", "rack", CLIQUE_LABEL, "kubernetes.io/hostname")
hostile_numbers = (st.sampled_from(NUMBERS) | st.integers(300, 6000).map("9".__mul__)
                   | st.integers(-(2**70), 2**70).map(str))
hostile_text = (hostile_numbers | st.sampled_from((*DURATIONS, *INSTANTS, *AMOUNTS, *TOPOLOGY))
                | st.integers(300, 5000).map(lambda n: "9" * n + "h")
                | st.integers(300, 5000).map(lambda n: "9" * n + "Gi")
                | st.text(max_size=24))
# Label values the apiserver stores (63 characters, alphanumeric at both ends).
label_values = (st.sampled_from((*keys.CLASSES, "batch", "Training", "g", "canary", "9" * 63,
                                 "1e9", "x" * 63, "a.b_c-d", ""))
                | st.from_regex(r"[a-z0-9]([a-z0-9._-]{0,20}[a-z0-9])?", fullmatch=True))


@st.composite
def marks(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and annotations under Airlock's prefix: a gang of Airlock's convention, its
    size honest or not, and any other key of Airlock's, users' or its own."""
    labels: dict[str, str] = {}
    annotations: dict[str, str] = {}
    if draw(st.booleans()):
        labels[keys.GANG_NAME_LABEL] = draw(label_values)
        annotations[keys.GANG_SIZE_ANNOTATION] = draw(hostile_numbers)
        if draw(st.booleans()):
            annotations[keys.GANG_MIN_SIZE_ANNOTATION] = draw(hostile_numbers)
    for key in draw(st.lists(st.sampled_from(MARK_KEYS), max_size=6, unique=True)):
        if key in LABEL_KEYS:
            labels[key] = draw(label_values)
        else:
            annotations[key] = draw(hostile_text)
    return labels, annotations


# Requests as the apiserver takes them: extended resources whole (as limits, which it
# copies to requests), CPU and memory of any scale; some no node meets.
_gpus = st.sampled_from((0, 0, 0, 1, 1, 2, 8, 9, 64, 1000, "1e3", "1k"))
_cpus = st.sampled_from(("100m", "1", "96", "100000", "1e6", "1e18"))
_memories = st.sampled_from(("128Mi", "16Gi", "1024Gi", "64Ti", "1Ei"))
_images = st.sampled_from(("busybox", "busybox", "ghcr.io/acme/trainer:1.0",
                           "vllm/vllm-openai:v0.6"))


@st.composite
def _container(draw: st.DrawFn, i: int) -> Obj:
    container: Obj = {"name": f"c{i}", "image": draw(_images)}
    resources: Obj = {}
    if gpus := draw(_gpus):
        resources["limits"] = {"nvidia.com/gpu": str(gpus)}
    if draw(st.booleans()):
        resources["requests"] = {"cpu": draw(_cpus), "memory": draw(_memories)}
    if resources:
        container["resources"] = resources
    return container


NOWHERE = {"example.com/nowhere": "true"}
FOREIGN_GATES = ("example.com/wait", "kueue.x-k8s.io/admission")
_gates = st.lists(st.sampled_from((*FOREIGN_GATES, keys.GATE)), min_size=1, max_size=2,
                  unique=True)
_tolerations = st.sampled_from((
    [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    [{"operator": "Exists"}]))
_selectors = st.sampled_from((NOWHERE, {CLIQUE_LABEL: "clique-0"}))
_nowhere_affinity = st.just({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "example.com/nowhere", "operator": "Exists"}]}]}}})
_priorities = st.sampled_from(("airlock-training", "airlock-scavenger"))
# A sandbox's nodes, and one no cluster has.
_node_names = st.sampled_from(("gpu-0000", "gpu-0001", "gpu-0007", "no-such-node"))
_run_times = st.sampled_from(("1s", "5s", "1h"))


@st.composite
def pod_templates(draw: st.DrawFn, restart: str = "Always") -> Obj:
    """A pod template (metadata and spec) as a tenant writes it, every part hostile or not:
    Airlock's keys, containers and requests, node selection, gates or nodeName; `restart`
    is its `restartPolicy`, "Never" for a Job's pods and bare pods."""
    labels, annotations = draw(marks())
    if draw(st.booleans()):
        # KWOK ends the pod after this: jobs that succeed at once teach run times.
        annotations[DELAY] = draw(_run_times)
    spec: Obj = {"containers": [draw(_container(i)) for i in range(draw(st.integers(1, 2)))],
                 "terminationGracePeriodSeconds": 0}
    extras = draw(st.fixed_dictionaries({}, optional={
        "tolerations": _tolerations, "nodeSelector": _selectors,
        "affinity": _nowhere_affinity, "priorityClassName": _priorities}))
    # A pod placed by name cannot wait behind a gate: the apiserver refuses both.
    placed = draw(st.sampled_from(("", "gates", "nodeName")))
    if placed == "gates":
        extras["schedulingGates"] = [{"name": g} for g in draw(_gates)]
    elif placed == "nodeName":
        extras["nodeName"] = draw(_node_names)
    if restart != "Always" and draw(st.booleans()):
        # What a pod of a Job (or a bare pod) may state; a Deployment's may not.
        extras["activeDeadlineSeconds"] = draw(st.sampled_from((1, 600, 2**31 - 1)))
    spec.update(extras)
    if restart != "Always":
        spec["restartPolicy"] = restart
    metadata: Obj = {}
    if labels:
        metadata["labels"] = labels
    if annotations:
        metadata["annotations"] = annotations
    return {"metadata": metadata, "spec": spec}


# The label by which a workload selects its pods: each object's own value.
SELECTED = "fuzz.gpu-airlock.io/of"


class Hostile(NamedTuple):
    """An object to create: its kind, and its body without a namespace; the apiserver
    makes its name from `generateName`."""

    kind: str
    body: Obj

    def made(self, serial: int) -> Obj:
        """The body to create as object `serial`: a workload selecting its own pods by a
        label no other object's pods carry, so no two workloads fight over pods."""
        if self.kind not in ("Deployment", "ReplicaSet", "StatefulSet", "DaemonSet"):
            return self.body
        value = f"h{serial}"
        spec = self.body["spec"]
        template = spec["template"]
        meta = template["metadata"]
        return {**self.body, "spec": {
            **spec, "selector": {"matchLabels": {SELECTED: value}},
            "template": {**template, "metadata": {
                **meta, "labels": {**meta.get("labels", {}), SELECTED: value}}}}}


GENERATE = {"generateName": "h-"}


def _workload(api_version: str, kind: str, template: Obj, **spec: Any) -> Hostile:
    return Hostile(kind, {"apiVersion": api_version, "kind": kind, "metadata": dict(GENERATE),
                          "spec": {**spec, "template": template}})


_replicas = st.integers(0, 3)


@st.composite
def _pod(draw: st.DrawFn) -> Hostile:
    template = draw(pod_templates("Never"))
    return Hostile("Pod", {"apiVersion": "v1", "kind": "Pod",
                           "metadata": {**template["metadata"], **GENERATE},
                           "spec": template["spec"]})


@st.composite
def _replicated(draw: st.DrawFn) -> Hostile:
    kind = draw(st.sampled_from(("Deployment", "ReplicaSet", "StatefulSet")))
    extra = {"serviceName": "h"} if kind == "StatefulSet" else {}
    return _workload("apps/v1", kind, draw(pod_templates()), replicas=draw(_replicas), **extra)


@st.composite
def _daemon_set(draw: st.DrawFn) -> Hostile:
    return _workload("apps/v1", "DaemonSet", draw(pod_templates()))


@st.composite
def _job_spec(draw: st.DrawFn) -> Obj:
    parallelism = draw(st.integers(1, 3))
    return {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
            "completionMode": draw(st.sampled_from(("Indexed", "NonIndexed"))),
            "template": draw(pod_templates("Never"))}


@st.composite
def _job(draw: st.DrawFn) -> Hostile:
    spec = draw(_job_spec())
    return Hostile("Job", {"apiVersion": "batch/v1", "kind": "Job", "metadata": dict(GENERATE),
                           "spec": spec})


@st.composite
def _cron_job(draw: st.DrawFn) -> Hostile:
    return Hostile("CronJob", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": dict(GENERATE),
        "spec": {"schedule": "* * * * *", "concurrencyPolicy": "Replace",
                 "suspend": draw(st.booleans()), "jobTemplate": {"spec": draw(_job_spec())}}})


_budget_values = (st.integers(0, 2**31 - 1) | st.sampled_from(("0%", "50%", "100%", "101%"))
                  | st.integers(300, 400).map(lambda n: "9" * n + "%"))


@st.composite
def _budget(draw: st.DrawFn) -> Hostile:
    which = draw(st.sampled_from(("minAvailable", "maxUnavailable")))
    return Hostile("PodDisruptionBudget", {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": dict(GENERATE),
        # Every pod of the namespace: a tenant may hold all her pods in place.
        "spec": {which: draw(_budget_values), "selector": {}}})


@st.composite
def _claim_template(draw: st.DrawFn) -> Hostile:
    exactly = {"deviceClassName": draw(st.sampled_from(("gpu.nvidia.com", "nowhere.example"))),
               "count": draw(st.sampled_from((1, 8, 128, 2**31, 2**62)))}
    return Hostile("ResourceClaimTemplate", {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": dict(GENERATE),
        "spec": {"spec": {"devices": {"requests": [{"name": "d", "exactly": exactly}]}}}})


# Pods most often; the workloads that make them as people write them; now and then a
# DaemonSet (its pods go on every node that tolerates them), a budget over a tenant's
# pods or a claim template.
# (Weighed by repeating each in a list: `one_of` flattens, and weighs its branches alike.)
_KINDS: tuple[st.SearchStrategy[Hostile], ...] = (
    (_pod(),) * 12 + (_replicated(),) * 4 + (_job(),) * 4 + (_cron_job(),) * 2
    + (_daemon_set(), _budget(), _claim_template()))
hostile_objects = st.sampled_from(_KINDS).flatmap(lambda kind: kind)


@st.composite
def incomplete_gangs(draw: st.DrawFn) -> list[Obj]:
    """The pods of a gang of Airlock's convention that never completes: fewer members
    than its size (an elastic one's minimum beyond what is there too), each asking for
    GPUs the cluster could give."""
    size = draw(st.integers(2, 64))
    present = draw(st.integers(1, min(size - 1, 4)))
    gpus = draw(st.sampled_from((1, 2, 8)))
    annotations = {keys.GANG_SIZE_ANNOTATION: str(size)}
    if draw(st.booleans()):
        annotations[keys.GANG_MIN_SIZE_ANNOTATION] = str(draw(st.integers(present + 1, size)))
    name = draw(st.from_regex(r"[a-z][a-z0-9]{3,11}", fullmatch=True))
    return [{"apiVersion": "v1", "kind": "Pod",
             "metadata": {"name": f"{name}-{i}", "labels": {keys.GANG_NAME_LABEL: name},
                          "annotations": annotations},
             "spec": {"terminationGracePeriodSeconds": 0, "containers": [
                 {"name": "c", "image": "ghcr.io/acme/trainer:1.0",
                  "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}
            for i in range(present)]


def reaches_webhook(pod: Obj) -> bool:
    """Whether the apiserver's pre-filter (the mutating webhook's `matchConditions`,
    webhook/accelerators.py) sends the pod to Airlock: an explicit class, DRA claims, or an
    extended resource asked for. Any other pod keeps every mark it was created with."""
    spec = pod["spec"]
    if keys.CLASS_LABEL in (pod["metadata"].get("labels") or {}) or spec.get("resourceClaims"):
        return True
    return any(extended(name) for c in [*spec["containers"], *spec.get("initContainers", [])]
               for part in ("requests", "limits")
               for name in (c.get("resources") or {}).get(part) or {})
