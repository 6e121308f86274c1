"""Classification: is a pod Airlock's business, and if so which class and which gang.

Pure and synchronous: a PodView and a Policy in, a Decision out. The order of the
checks is the contract in docs/admission.md ("Class").
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Mapping
from typing import NamedTuple

from webhook.conventions.base import Membership
from webhook.keys import (
    CLASS_LABEL,
    CLASSES,
    GATE,
    IGNORE_NAMESPACE_LABEL,
    RULE_ANNOTATION,
    ClassName,
)
from webhook.operators.registry import membership_of
from webhook.pods import PodView
from webhook.policy.model import Match, Policy, Rule
from webhook.values import shown

# Names recorded as the deciding "rule" when no policy rule decided.
RULE_CLASS_LABEL = "class-label"
RULE_GANG_MEMBER = "gang-member"
RULE_DEFAULT_CLASS = "default-class"


class Decision(NamedTuple):
    # A NamedTuple, not a frozen dataclass: one is built on every admission request, and a
    # frozen dataclass costs over three times as much to build.
    in_scope: bool
    reason: str
    class_: ClassName | None = None
    rule: str | None = None
    gang: Membership | None = None
    # Set when the explicit class label holds something that is not a class.
    class_label_error: str | None = None
    # Another system's scheduling gate the pod came with (the first, when several): that
    # system decides when the pod starts, so Airlock neither gates nor gangs it. Its class,
    # priority and tolerations are policy's all the same.
    held: str | None = None


def _out(reason: str) -> Decision:
    return Decision(False, reason)


@functools.lru_cache(maxsize=512)
def _globs(globs: tuple[str, ...]) -> re.Pattern[str]:
    """One compiled regex for a rule's globs: this runs on every admission request."""
    return re.compile("|".join(f"(?:{fnmatch.translate(g)})" for g in globs))


Check = Callable[[PodView, Membership | None], bool]


def _checks(match: Match) -> tuple[Check, ...]:
    """The conditions a Match sets, as small predicates, cheapest first. Compiled once per
    policy: empty conditions cost nothing on the admission hot path."""
    checks: list[Check] = []
    if match.in_gang is not None:
        want = match.in_gang
        checks.append(lambda _, gang: want == (gang is not None))
    if match.has_any_label:
        keys = frozenset(match.has_any_label)
        checks.append(lambda pod, _: not keys.isdisjoint(pod.labels))
    if match.lacks_labels:
        absent = frozenset(match.lacks_labels)
        checks.append(lambda pod, _: absent.isdisjoint(pod.labels))
    if match.labels:
        labels = tuple(match.labels.items())
        checks.append(lambda pod, _: all(pod.labels.get(k) == v for k, v in labels))
    if match.has_any_annotation:
        akeys = frozenset(match.has_any_annotation)
        checks.append(lambda pod, _: not akeys.isdisjoint(pod.annotations))
    if match.annotations:
        annotations = tuple(match.annotations.items())
        checks.append(lambda pod, _: all(pod.annotations.get(k) == v for k, v in annotations))
    if match.owner_kinds:
        kinds = frozenset(match.owner_kinds)
        checks.append(lambda pod, _: pod.controller_kind() in kinds)
    if match.requests:
        requests = frozenset(match.requests)
        checks.append(lambda pod, _: not requests.isdisjoint(pod.resources))
    if match.namespaces:
        namespaces = _globs(match.namespaces)
        checks.append(lambda pod, _: namespaces.match(pod.namespace) is not None)
    if match.images:
        images = _globs(match.images)
        checks.append(lambda pod, _: any(images.match(i) for i in pod.image_names))
    return tuple(checks)


# A rule compiled: the rule, its checks, and the reason a Decision it makes gives.
CompiledRule = tuple[Rule, tuple[Check, ...], str]


def _compile(policy: Policy) -> tuple[CompiledRule, ...]:
    return tuple((rule, _checks(rule.match), f"policy rule {rule.name}")
                 for rule in policy.rules)


def _compiled_rules(policy: Policy) -> tuple[CompiledRule, ...]:
    return policy.derived("classifying.rules", _compile)


def scope_exclusion(
    pod: PodView, policy: Policy, namespace_labels: Mapping[str, str] | None
) -> str | None:
    if pod.namespace in policy.excluded_namespaces:
        return f"namespace {pod.namespace} is excluded"
    if namespace_labels and namespace_labels.get(IGNORE_NAMESPACE_LABEL) == "true":
        return f"namespace {pod.namespace} is labelled {IGNORE_NAMESPACE_LABEL}=true"
    if pod.scheduler_name not in policy.schedulers:
        return f"scheduled by {pod.scheduler_name}, not a scheduler Airlock handles"
    return None


def classify(
    pod: PodView, policy: Policy, namespace_labels: Mapping[str, str] | None = None
) -> Decision:
    decision = _classify(pod, policy, namespace_labels)
    held = next((g for g in pod.gates if g != GATE), None) if pod.gates else None
    if held is None or not decision.in_scope:
        return decision
    # A gate is no way out of policy: a pod another system holds (Kueue's admission gate,
    # or one its author added to lift later) is classified like any other. Its gang, if it
    # is one, is that system's to start whole: the class it gave stays.
    return decision._replace(gang=None, held=held, reason=f"{decision.reason}; held by "
                             f"{shown(held)}, which starts it, not Airlock")


def _classify(pod: PodView, policy: Policy, namespace_labels: Mapping[str, str] | None
              ) -> Decision:
    excluded = scope_exclusion(pod, policy, namespace_labels)
    if excluded:
        return _out(excluded)
    explicit = pod.labels.get(CLASS_LABEL)
    if explicit is None and pod.resources.isdisjoint(policy.gpu_resources):
        return _out("requests no accelerator and has no explicit class")
    gang = membership_of(pod)
    if explicit is not None:
        if explicit not in CLASSES:
            return Decision(
                in_scope=True,
                reason="explicit class label is invalid",
                gang=gang,
                class_label_error=f"label {CLASS_LABEL}={shown(explicit)} is not one of "
                f"{', '.join(CLASSES)}",
            )
        if policy.granted(explicit, pod.namespace):
            # On reinvocation the label is Airlock's own record: keep the rule it names.
            recorded = pod.annotations.get(RULE_ANNOTATION) or RULE_CLASS_LABEL
            return Decision(True, f"label {CLASS_LABEL}", explicit, recorded, gang)
        # Not the namespace's to ask for: only where the rules give it anyway (the
        # webhook's own label, on reinvocation, is such a case).
        ruled = _by_rules(pod, policy, gang)
        if ruled.class_ != explicit:
            granted = ", ".join(policy.granted_to(explicit)) or "no namespace"
            return ruled._replace(
                class_=None, rule=None,
                class_label_error=f"namespace {pod.namespace} may not ask for class "
                f"{explicit} with the {CLASS_LABEL} label; the policy's grants give it to: "
                f"{granted} (spec.grants)")
        return ruled
    return _by_rules(pod, policy, gang)


def _by_rules(pod: PodView, policy: Policy, gang: Membership | None) -> Decision:
    # A plain loop, not all() over a generator: this runs for every rule of every request.
    for rule, checks, reason in _compiled_rules(policy):
        for check in checks:
            if not check(pod, gang):
                break
        else:
            return Decision(True, reason, rule.class_, rule.name, gang)
    if gang is not None:
        return Decision(True, f"member of {gang.source} gang", "training", RULE_GANG_MEMBER, gang)
    if policy.default_class is not None:
        return Decision(True, "no policy rule matched: the policy's defaultClass",
                        policy.default_class, RULE_DEFAULT_CLASS)
    return Decision(True, "no policy rule matched", gang=None)
