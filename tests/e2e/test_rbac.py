"""A real apiserver, with deploy/'s RBAC applied, answers SubjectAccessReviews for
Airlock's accounts: every grant docs/security.md lists is allowed, and what lies next to
it (another verb on the same resource, another object's name, another namespace, the
secrets and subresources nobody needs) is not."""

from __future__ import annotations

import asyncio

import pytest
from kubernetes_asyncio import client

from tests.grants import ANY, Grant, documented_grants
from webhook.keys import SYSTEM_NAMESPACE

VERBS = ("get", "list", "watch", "create", "update", "patch", "delete", "deletecollection")
# What no account of Airlock's may do anywhere, however the rest changes.
NEVER = [("", "secrets", "list"), ("", "secrets", "watch"), ("", "pods", "create"),
         ("", "pods", "delete"), ("", "pods/exec", "create"), ("", "pods/binding", "create"),
         ("", "serviceaccounts/token", "create"), ("", "configmaps", "list"),
         ("rbac.authorization.k8s.io", "clusterroles", "escalate"),
         ("rbac.authorization.k8s.io", "clusterrolebindings", "create"),
         ("admissionregistration.k8s.io", "validatingadmissionpolicybindings", "delete"),
         ("", "namespaces", "update"), ("gpu-airlock.io", "namespaces", "ignore")]


async def _allowed(api: client.ApiClient, g: Grant) -> bool:
    attributes = {"group": g.group, "resource": g.resource.split("/")[0], "verb": g.verb}
    if "/" in g.resource:
        attributes["subresource"] = g.resource.split("/")[1]
    if g.namespace != ANY:
        attributes["namespace"] = g.namespace
    if g.name != ANY:
        attributes["name"] = g.name
    review = await client.AuthorizationV1Api(api).create_subject_access_review(body={
        "spec": {"user": g.user, "resourceAttributes": attributes,
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{SYSTEM_NAMESPACE}",
                            "system:authenticated"]}})
    return bool(review.status.allowed)


def _next_to(grants: set[Grant]) -> set[Grant]:
    """What lies next to each grant and is not itself granted."""
    near: set[Grant] = set()
    for g in grants:
        near |= {g._replace(verb=v) for v in VERBS}
        if g.name != ANY:
            near.add(g._replace(name=f"not-{g.name}"))
        if g.namespace != ANY:
            near.add(g._replace(namespace="default"))
        near |= {Grant(g.account, group, resource, verb, "default", ANY)
                 for group, resource, verb in NEVER}
    return {n for n in near if not any(_covers(g, n) for g in grants)}


def _covers(g: Grant, n: Grant) -> bool:
    """Whether grant `g` allows `n` (a cluster-wide grant covers every namespace, an
    unnamed one every name)."""
    return (g.account, g.group, g.resource, g.verb) == (n.account, n.group, n.resource,
                                                        n.verb) \
        and g.namespace in (ANY, n.namespace) and g.name in (ANY, n.name)


@pytest.mark.usefixtures("controller_kubeconfig", "webhook_kubeconfig")
async def test_every_documented_grant_and_nothing_next_to_it(api: client.ApiClient) -> None:
    grants = documented_grants()
    near = _next_to(grants)
    assert len(near) > len(grants)  # the check below looks at something
    limit = asyncio.Semaphore(16)

    async def ask(g: Grant) -> tuple[Grant, bool]:
        async with limit:
            return g, await _allowed(api, g)
    answers = dict(await asyncio.gather(*(ask(g) for g in grants | near)))
    assert [g for g in grants if not answers[g]] == [], "documented but not allowed"
    assert [g for g in near if answers[g]] == [], "allowed but not documented"
