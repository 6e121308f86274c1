"""The admission engine: a decoded Request and the current Policy in, a Response out.
It knows nothing of HTTP; anything unexpected is caught here, once."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from webhook.admission import responses
from webhook.admission.claiming import Claims, claimed
from webhook.admission.mutating import mutate
from webhook.admission.priorities import UNKNOWN, Priorities
from webhook.admission.reviews import Outcome, Request, Response
from webhook.admission.validating import places_pods, validate_create, validate_update
from webhook.pods import PodShapeError, PodView
from webhook.policy.classifying import Decision, classify, scope_exclusion
from webhook.policy.model import Policy
from webhook.values import described

log = logging.getLogger("airlock.admission")

NO_POLICY = "Airlock has no valid policy loaded; the pod passes unchanged"


class NotAPod(ValueError):
    pass


def _pod(obj: Any, namespace: str, role: str) -> PodView:
    if isinstance(obj, dict):
        kind = obj.get("kind")
        if kind is not None and kind != "Pod":
            raise NotAPod(f"Airlock handles only Pods, got {described(kind)} as {role}; check the "
                          f"webhook configuration's rules")
    try:
        return PodView.parse(obj, namespace)
    except PodShapeError as e:
        path = role if e.path == "object" else f"{role}.{e.path}"
        raise PodShapeError(path, e.expected) from None


def _outcome(decision: Decision) -> Outcome:
    if not decision.in_scope:
        return "out-of-scope"
    return decision.class_ or "unclassified"


def _claimed(pod: PodView, claims: Claims | None, policy: Policy) -> PodView | Response:
    """The pod with what its DRA claims ask for; a denial when that cannot be known for a
    pod in scope. No claims looked up (`--dra none`): the pod as it is."""
    if claims is None or not pod.claims or not policy.device_classes:
        return pod
    looked = claimed(pod, claims, policy)
    if isinstance(looked, PodView):
        return looked
    return pod if scope_exclusion(pod, policy, None) else responses.denied(looked, code=409)


def _mutate(request: Request, policy: Policy, claims: Claims | None,
            priorities: Priorities) -> Response:
    if request.operation != "CREATE":
        return responses.allowed()
    pod = _claimed(_pod(request.object, request.namespace, "object"), claims, policy)
    if isinstance(pod, Response):
        return pod._replace(outcome="unknown-claim")
    decision = classify(pod, policy)
    mutation = mutate(pod, decision, policy, request.operation, priorities)
    return responses.patched(mutation.patch, mutation.warnings, _outcome(decision))


def _validate(request: Request, policy: Policy, claims: Claims | None,
              _: Priorities) -> Response:
    if request.operation == "CREATE":
        pod = _claimed(_pod(request.object, request.namespace, "object"), claims, policy)
        if isinstance(pod, Response):
            return pod
        verdict = validate_create(pod, classify(pod, policy), policy,
                                  places_pods(request.username, request.groups))
    elif request.operation == "UPDATE":
        pod = _pod(request.object, request.namespace, "object")
        old = _pod(request.old_object, request.namespace, "oldObject")
        verdict = validate_update(old, pod, request.username, policy)
    else:
        return responses.allowed()
    if verdict.denial is not None:
        return responses.denied(verdict.denial)
    return responses.allowed(verdict.warnings)


Handler = Callable[[Request, Policy, Claims | None, Priorities], Response]
MUTATE: Handler = _mutate
VALIDATE: Handler = _validate


def _decides(handler: Handler, request: Request) -> bool:
    """Whether this review is the one that decides a pod's class, and so carries an
    outcome: only a /mutate CREATE. /validate sees the same pod again and an update never
    changes a class, so each pod is counted once."""
    return handler is MUTATE and request.operation == "CREATE"


def handle(handler: Handler, request: Request, policy: Policy | None,
           claims: Claims | None = None, priorities: Priorities = UNKNOWN) -> Response:
    """`claims`: the DRA claims and templates the pod names, looked up beforehand; None
    when claims are not read (`--dra none`, or a pod that names none). `priorities`: the
    cluster's PriorityClasses as far as the webhook's watch knows them."""
    if policy is None:
        return responses.allowed(
            (NO_POLICY,), "no-policy" if _decides(handler, request) else None)
    try:
        return handler(request, policy, claims, priorities)
    except (PodShapeError, NotAPod) as e:
        return responses.denied(
            str(e), "bad-object" if _decides(handler, request) else None, code=400)
    except Exception:
        log.exception("unexpected error reviewing %s", request.uid)
        return responses.errored("Airlock failed to review this pod; see the webhook's log",
                                 "error" if _decides(handler, request) else None)
