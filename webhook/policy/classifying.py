"""Classification: is a pod Airlock's business, and if so which class and which gang.

Pure and synchronous: a PodView and a Policy in, a Decision out. The order of the
checks is the contract in DESIGN.md ("Default policy").
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from dataclasses import dataclass

from webhook.gangs.base import Gang
from webhook.gangs.registry import find_gang
from webhook.keys import (
    CLASS_LABEL,
    CLASSES,
    GATE,
    IGNORE_NAMESPACE_LABEL,
    RULE_ANNOTATION,
    ClassName,
)
from webhook.pods import PodView
from webhook.policy.model import Match, Policy

# Names recorded as the deciding "rule" when no policy rule decided.
RULE_CLASS_LABEL = "class-label"
RULE_GANG_MEMBER = "gang-member"


@dataclass(frozen=True, slots=True)
class Decision:
    in_scope: bool
    reason: str
    class_: ClassName | None = None
    rule: str | None = None
    gang: Gang | None = None
    # Set when the explicit class label holds something that is not a class.
    class_label_error: str | None = None


def _out(reason: str) -> Decision:
    return Decision(in_scope=False, reason=reason)


def _any_glob(value: str, globs: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(value, g) for g in globs)


def matches(match: Match, pod: PodView, gang: Gang | None) -> bool:
    """Whether every condition of `match` holds for the pod (cheapest checks first)."""
    labels, annotations = pod.labels, pod.annotations
    if match.in_gang is not None and match.in_gang != (gang is not None):
        return False
    if match.has_any_label and not any(k in labels for k in match.has_any_label):
        return False
    if any(k in labels for k in match.lacks_labels):
        return False
    if any(labels.get(k) != v for k, v in match.labels.items()):
        return False
    if match.has_any_annotation and not any(k in annotations for k in match.has_any_annotation):
        return False
    if any(annotations.get(k) != v for k, v in match.annotations.items()):
        return False
    if match.owner_kinds:
        owner = pod.controller_owner()
        if owner is None or owner.kind not in match.owner_kinds:
            return False
    if match.namespaces and not _any_glob(pod.namespace, match.namespaces):
        return False
    if match.requests and not any(pod.requested(r) for r in match.requests):
        return False
    return not match.images or any(_any_glob(i, match.images) for i in pod.images())


def _scope_exclusion(
    pod: PodView, policy: Policy, namespace_labels: Mapping[str, str] | None
) -> str | None:
    if pod.namespace in policy.excluded_namespaces:
        return f"namespace {pod.namespace} is excluded"
    if namespace_labels and namespace_labels.get(IGNORE_NAMESPACE_LABEL) == "true":
        return f"namespace {pod.namespace} is labelled {IGNORE_NAMESPACE_LABEL}=true"
    if pod.scheduler_name not in policy.schedulers:
        return f"scheduled by {pod.scheduler_name}, not a scheduler Airlock handles"
    foreign = [g for g in pod.gates if g != GATE]
    if foreign:
        return f"already gated by {', '.join(foreign)}"
    return None


def classify(
    pod: PodView, policy: Policy, namespace_labels: Mapping[str, str] | None = None
) -> Decision:
    excluded = _scope_exclusion(pod, policy, namespace_labels)
    if excluded:
        return _out(excluded)
    explicit = pod.labels.get(CLASS_LABEL)
    if explicit is None and not any(pod.requested(r) for r in policy.accelerators):
        return _out("requests no accelerator and has no explicit class")
    gang = find_gang(pod)
    if explicit is not None:
        if explicit not in CLASSES:
            return Decision(
                in_scope=True,
                reason="explicit class label is invalid",
                gang=gang,
                class_label_error=f"label {CLASS_LABEL}={explicit!r} is not one of "
                f"{', '.join(CLASSES)}",
            )
        # On reinvocation the label is Airlock's own record: keep the rule it names.
        rule = pod.annotations.get(RULE_ANNOTATION, RULE_CLASS_LABEL)
        return Decision(True, f"label {CLASS_LABEL}", explicit, rule, gang)
    for rule in policy.rules:
        if matches(rule.match, pod, gang):
            return Decision(True, f"policy rule {rule.name}", rule.class_, rule.name, gang)
    if gang is not None:
        return Decision(True, f"member of {gang.source} gang", "training", RULE_GANG_MEMBER, gang)
    return Decision(True, "no policy rule matched", gang=None)
