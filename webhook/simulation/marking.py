"""A trace's job as the pods a cluster would hold: each pod written as a user would
(the class label; for a multi-pod job, the gang name and size), then run through the
webhook's own admission engine (mutate, then validate), then given the priority the
apiserver resolves from the PriorityClass the webhook set. So the simulation sees the
marks (gate, gang, topology key and mode, priority) that the policy under test makes,
without a second copy of any rule."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonpatch

from webhook.admission import engine
from webhook.admission.reviews import Request
from webhook.controller.core.constraints import Constraints
from webhook.controller.core.pods import PodInfo
from webhook.keys import CLASS_LABEL, CLASSES, GANG_NAME_LABEL
from webhook.policy.model import Grant, Policy
from webhook.simulation.clusters import Cluster, Selector
from webhook.simulation.traces import Job, airlock_annotations

_USER = "airlock-simulate"


@dataclass(frozen=True, slots=True)
class Marked:
    """A job's pods as admitted: one template, varied per pod."""

    job: Job
    template: PodInfo
    # Whether the scheduler may evict lower-priority pods for these (`preemptionPolicy`).
    preempts: bool
    # The label sets one of which a node must carry, by its nodeSelector and required
    # node affinity: one per GPU model admission keeps a pod it does not gate to.
    selectors: tuple[Selector, ...] = ((),)

    def pods(self, attempt: int, now: float) -> list[PodInfo]:
        """The pods of one attempt (a job preempted while running starts again with new
        pods, as its operator would make them), created at `now`."""
        prefix = self.job.name if attempt == 0 else f"{self.job.name}-r{attempt}"
        return [dataclasses.replace(self.template, name=f"{prefix}-{i}",
                                    uid=f"{self.job.namespace}/{prefix}-{i}", created=now)
                for i in range(self.job.pods)]


@dataclass(frozen=True, slots=True)
class Rejected:
    job: Job
    reason: str


def _written(job: Job, resource: str) -> dict[str, Any]:
    labels: dict[str, str] = {CLASS_LABEL: job.cls}
    if job.pods > 1:
        labels[GANG_NAME_LABEL] = job.name
    gpus = {resource: str(job.gpus)}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{job.name}-0", "namespace": job.namespace,
                         "labels": labels, "annotations": airlock_annotations(job)},
            "spec": {"containers": [{"name": "main", "image": "simulated/job",
                                     "resources": {"requests": gpus, "limits": gpus}}],
                     **({"nodeSelector": dict(job.node_selector)} if job.node_selector
                        else {})}}


def _request(obj: dict[str, Any], namespace: str) -> Request:
    return Request(uid="simulate", operation="CREATE", namespace=namespace, username=_USER,
                   object=obj, old_object=None)


def mark(job: Job, policy: Policy) -> Marked | Rejected:
    """The job's pods as the webhook leaves them, or why admission turns them away."""
    written = _written(job, policy.accelerators[0])
    mutation = engine.handle(engine.MUTATE, _request(written, job.namespace), policy)
    if not mutation.allowed:
        return Rejected(job, mutation.message or "denied by the mutating webhook")
    mutated: dict[str, Any] = jsonpatch.apply_patch(written, list(mutation.patch),
                                                    in_place=True) \
        if mutation.patch else written
    verdict = engine.handle(engine.VALIDATE, _request(mutated, job.namespace), policy)
    if not verdict.allowed:
        return Rejected(job, verdict.message or "denied by the validating webhook")
    # The apiserver's Priority plugin: the value and policy of the named PriorityClass.
    spec = mutated["spec"]
    name = spec.get("priorityClassName")
    owner = policy.priority_class_owner(name) if name else None
    priority_class = policy.classes[owner].priority_class if owner else None
    spec["priority"] = priority_class.value if priority_class else 0
    if priority_class is not None:
        spec["preemptionPolicy"] = priority_class.preemption_policy
    preempts = priority_class is None or priority_class.preemption_policy != "Never"
    # Owned, as a Job's or an operator's pods are: deleted, they are made again; a single
    # pod by its Job, which targeted defragmentation reads (`moving`).
    info = PodInfo.parse(mutated)
    owners = _JOB if info.marks.single else info.owners
    return Marked(job, dataclasses.replace(info, owned=True, owners=owners), preempts,
                  _selectors(job.node_selector, spec))


def _selectors(selector: Selector, spec: Mapping[str, Any]) -> tuple[Selector, ...]:
    """The label sets a node must carry one of: the nodeSelector, and each term of the
    required node affinity admission wrote (the labels its `In` expressions of one value
    name, all the simulated nodes carry)."""
    # The controller's own reading of a pod's required terms.
    terms = Constraints.read(spec, {}, {}).affinity_terms
    if not terms:
        return (selector,)
    return tuple(dict.fromkeys(tuple(sorted({**dict(selector), **{
        e["key"]: e["values"][0] for e in term.get("matchExpressions") or ()
        if e.get("operator") == "In" and len(e.get("values") or ()) == 1}}.items()))
        for term in terms))


_JOB = ({"apiVersion": "batch/v1", "kind": "Job", "name": "simulated", "controller": True},)


class Marker:
    """`mark` for a whole trace. Single pods that differ only in their name are marked
    alike (no rule reads a pod's name), so each kind is run through the engine once;
    gangs carry their own name in their marks and go through it each."""

    def __init__(self, policy: Policy) -> None:
        # A trace states each job's class, which its pods ask for by label: the replay
        # stands for a cluster whose policy grants every namespace the classes it runs.
        self.policy = policy.model_copy(update={"grants": (
            *policy.grants, *(Grant.model_validate({"class": c, "namespaces": ("*",)})
                              for c in CLASSES))})
        self._singles: dict[tuple[str, str, int, float | None, tuple[tuple[str, str], ...],
                                  tuple[str, ...]], Marked | Rejected] = {}

    def __call__(self, job: Job) -> Marked | Rejected:
        if job.pods > 1:
            return mark(job, self.policy)
        key = (job.namespace, job.cls, job.gpus, job.expected_runtime, job.node_selector,
               job.gpu_models)
        found = self._singles.get(key)
        if found is None:
            found = self._singles[key] = mark(job, self.policy)
        return dataclasses.replace(found, job=job)


def never_runnable(job: Job, marked: Marked, cluster: Cluster, gated: bool) -> bool:
    """Larger than every node, or than the cluster, or than every domain where it needs
    one: counting only the nodes its nodeSelector selects."""
    selector = job.node_selector
    most, total = cluster.selected(selector)
    least = job.least * job.gpus
    if job.gpus > most or least > total:
        return True
    key = marked.template.marks.topology_key
    return gated and job.pods > 1 and key is not None and \
        marked.template.marks.topology_mode == "required" and \
        least > cluster.largest(key, selector)
