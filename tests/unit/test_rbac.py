"""deploy/ grants Airlock's accounts exactly what docs/security.md lists, each grant with
its reason: nothing more, nothing less, no wildcard."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import yaml

from tests.grants import ANY, Grant, documented_grants
from tests.paths import ROOT
from webhook.keys import SYSTEM_NAMESPACE

BASE = ROOT / "deploy" / "base"


def _docs() -> list[dict[str, Any]]:
    listed = yaml.safe_load((BASE / "kustomization.yaml").read_text())["resources"]
    return [doc for name in listed if name.endswith(".yaml")
            for doc in yaml.safe_load_all((BASE / name).read_text()) if doc]


def _accounts(binding: dict[str, Any]) -> Iterator[str]:
    for subject in binding.get("subjects") or []:
        assert subject["kind"] == "ServiceAccount", subject
        assert subject["namespace"] == SYSTEM_NAMESPACE, subject
        yield subject["name"]


def granted() -> set[Grant]:
    """Every (account, group, resource, verb, namespace, name) the base's bindings give."""
    docs = _docs()
    roles = {(d["kind"], d["metadata"].get("namespace"), d["metadata"]["name"]): d
             for d in docs if d["kind"] in ("ClusterRole", "Role")}
    found: set[Grant] = set()
    for binding in docs:
        if binding["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ref = binding["roleRef"]
        scope = binding["metadata"].get("namespace") if binding["kind"] == "RoleBinding" \
            else None
        role = roles[(ref["kind"], scope if ref["kind"] == "Role" else None, ref["name"])]
        for account in _accounts(binding):
            for rule in role["rules"]:
                assert "nonResourceURLs" not in rule, "no account of Airlock's reads URLs"
                for field in ("apiGroups", "resources", "verbs"):
                    assert ANY not in rule[field], f"a wildcard in {role['metadata']['name']}"
                found |= {Grant(account, group, resource, verb, scope or ANY, name)
                          for group in rule["apiGroups"] for resource in rule["resources"]
                          for verb in rule["verbs"]
                          for name in rule.get("resourceNames") or [ANY]}
    return found


def test_deploy_grants_exactly_what_the_security_page_lists() -> None:
    documented, given = documented_grants(), granted()
    assert given - documented == set(), "granted but not documented"
    assert documented - given == set(), "documented but not granted"


def test_objects_are_read_by_name_wherever_a_name_is_known() -> None:
    # In Airlock's namespace, only `create` (which RBAC cannot limit by name) is not, and
    # deleting placeholder pods, which are named after the gang they stand for.
    for g in granted():
        if g.namespace == SYSTEM_NAMESPACE and g.verb != "create" and \
                (g.resource, g.verb) != ("pods", "delete"):
            assert g.name != ANY, g


def test_nobody_is_bound_to_the_roles_people_bind() -> None:
    bound = {d["roleRef"]["name"] for d in _docs()
             if d["kind"] in ("ClusterRoleBinding", "RoleBinding")}
    assert not bound & {"airlock-metrics-reader", "airlock-namespace-opt-out",
                        "airlock-gate-remover", "airlock-dashboard-viewer"}
