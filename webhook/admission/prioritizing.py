"""Priority only as policy gives it: a pod in Airlock's scope runs at its class's priority,
or at a PriorityClass the policy lets its namespace ask for (`spec.grants`).

A priorityClassName the pod names is judged by what it would give the pod. One of an
Airlock class goes with that class: kept where the namespace may ask for the class. Any
other, Kubernetes' own `system-cluster-critical` included, is kept while it ranks no
higher than the pod's class, or where a grant names it; above, it is an escalation. The
apiserver's Priority plugin resolves `spec.priority` from the name before any webhook
runs, so the webhook compares numbers: mutation replaces an escalation with the class's
PriorityClass (and says so), validation refuses one that is still there (the mutating
webhook was skipped or something after it changed the name).

Pure: the pod, its class and the policy in, a judgement out."""

from __future__ import annotations

from typing import Final, NamedTuple

from webhook.keys import ClassName
from webhook.pods import PodView
from webhook.policy.model import Policy

# Kubernetes' own PriorityClasses, in every cluster, at these fixed values: known without
# asking the apiserver (explain has no `spec.priority` to read).
SYSTEM_PRIORITIES: Final = {"system-cluster-critical": 2_000_000_000,
                            "system-node-critical": 2_000_001_000}


def value_of(policy: Policy, name: str | None, resolved: int | None = None) -> int | None:
    """The priority `name` gives a pod: as the apiserver resolved it on the pod
    (`resolved`, spec.priority), else an Airlock class's value in the policy, else one of
    Kubernetes' own; None when unknown."""
    if resolved is not None:
        return resolved
    owner = policy.priority_class_owner(name) if name else None
    if owner is not None:
        return policy.classes[owner].priority_class.value
    return SYSTEM_PRIORITIES.get(name or "")


class Judgement(NamedTuple):
    # Whether the pod's priorityClassName gives way to its class's.
    replace: bool = False
    # Why keeping it would give the pod a priority policy does not: mutation says so as
    # it replaces it, validation refuses a pod that still carries it.
    escalation: str | None = None
    # A PriorityClass kept, which is worth a word.
    note: str | None = None


KEEP = Judgement()


def judge(pod: PodView, cls: ClassName, policy: Policy) -> Judgement:
    """What becomes of the pod's priorityClassName, for a pod of class `cls`."""
    spec = policy.classes[cls].priority_class
    current = pod.priority_class_name
    if current is None or current == spec.name:
        return Judgement(replace=current is None)
    namespace = pod.namespace
    owner = policy.priority_class_owner(current)
    if owner is not None:
        if not policy.granted(owner, namespace):
            return Judgement(True, f"no grant for class {owner} in namespace {namespace} "
                                   f"(spec.grants)")
        return Judgement(replace=spec.override_user)
    value = value_of(policy, current, pod.priority)
    if value is not None and value > spec.value and \
            not policy.priority_granted(current, namespace):
        return Judgement(True, f"priority {value} is above class {cls}'s {spec.value}, with "
                               f"no grant in namespace {namespace} (spec.grants)")
    if spec.override_user:
        return Judgement(replace=True)
    if policy.priority_granted(current, namespace):
        return KEEP
    return Judgement(note=f"kept the pod's priorityClassName {current}; the class would set "
                          f"{spec.name}")
