"""Whether a pod may use a node at all, as the scheduler's filters decide it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import member, node
from webhook.controller.core.cluster.filters import eligible

LABELS = {"gpu": "h100", "zone": "z1", "generation": "9", "padded": "1_0",
          "big": "9223372036854775808"}


def affinity(*exprs: dict[str, Any], fields: list[dict[str, Any]] | None = None
             ) -> dict[str, Any]:
    term: dict[str, Any] = {"matchExpressions": list(exprs)}
    if fields:
        term["matchFields"] = fields
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [term]}}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    return {"key": key, "operator": op, "values": list(values)}


@pytest.mark.parametrize(("requirement", "matches"), [
    (expr("gpu", "In", "a100", "h100"), True),
    (expr("gpu", "In", "a100"), False),
    (expr("gpu", "NotIn", "a100"), True),
    (expr("gpu", "NotIn", "h100"), False),
    (expr("missing", "NotIn", "x"), True),
    (expr("zone", "Exists"), True),
    (expr("missing", "Exists"), False),
    (expr("missing", "DoesNotExist"), True),
    (expr("zone", "DoesNotExist"), False),
    (expr("generation", "Gt", "8"), True),
    (expr("generation", "Gt", "9"), False),
    (expr("generation", "Lt", "10"), True),
    (expr("generation", "Lt", "9"), False),
    (expr("gpu", "Gt", "1"), False),          # not a number: no match
    # What Go's strconv.ParseInt reads, and not what else Python's int() takes.
    (expr("generation", "Gt", "08"), True),
    (expr("generation", "Lt", "1_0"), False),
    (expr("generation", "Lt", "99999999999999999999"), False),
    (expr("padded", "Gt", "1"), False),
    (expr("big", "Gt", "1"), False),
    (expr("missing", "Lt", "1"), False),
    (expr("gpu", "Bogus", "h100"), False),
])
def test_node_affinity_operators(requirement: dict[str, Any], matches: bool) -> None:
    pod = member("g", 0, affinity=affinity(requirement))
    assert eligible(pod, node("n", None, labels=LABELS)) is matches


def test_affinity_terms_are_ored_and_expressions_anded() -> None:
    terms = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [
            {"matchExpressions": [expr("gpu", "In", "a100")]},
            {"matchExpressions": [expr("gpu", "In", "h100"), expr("zone", "In", "z1")]},
        ]}}}
    assert eligible(member("g", 0, affinity=terms), node("n", None, labels=LABELS))
    both = affinity(expr("gpu", "In", "h100"), expr("zone", "In", "z2"))
    assert not eligible(member("g", 0, affinity=both), node("n", None, labels=LABELS))


def test_match_fields_select_by_node_name() -> None:
    pick = affinity(fields=[expr("metadata.name", "In", "n2")])
    assert not eligible(member("g", 0, affinity=pick), node("n1", None))
    assert eligible(member("g", 0, affinity=pick), node("n2", None))


def test_node_selector_must_match_every_entry() -> None:
    n = node("n", None, labels=LABELS)
    assert eligible(member("g", 0, nodeSelector={"gpu": "h100", "zone": "z1"}), n)
    assert not eligible(member("g", 0, nodeSelector={"gpu": "h100", "zone": "z2"}), n)


@pytest.mark.parametrize(("taint", "tolerations", "allowed"), [
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"}, [], False),
    ({"key": "dedicated", "value": "ml", "effect": "PreferNoSchedule"}, [], True),
    ({"key": "dedicated", "value": "ml", "effect": "NoExecute"}, [], False),
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
     [{"key": "dedicated", "operator": "Equal", "value": "ml"}], True),
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
     [{"key": "dedicated", "value": "ml"}], True),          # Equal is the default operator
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
     [{"key": "dedicated", "value": "web"}], False),
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
     [{"key": "dedicated", "operator": "Exists", "effect": "NoExecute"}], False),
    ({"key": "dedicated", "value": "ml", "effect": "NoSchedule"},
     [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}], True),
    ({"key": "anything", "effect": "NoSchedule"}, [{"operator": "Exists"}], True),
])
def test_taints_and_tolerations(taint: dict[str, Any], tolerations: list[dict[str, Any]],
                                allowed: bool) -> None:
    pod = member("g", 0, tolerations=tolerations)
    assert eligible(pod, node("n", None, taints=[taint])) is allowed


@pytest.mark.parametrize("bad", [{"ready": "False"}, {"unschedulable": True}])
def test_not_ready_and_cordoned_nodes_take_nothing(bad: dict[str, Any]) -> None:
    assert not eligible(member("g", 0), node("n", None, **bad))


@pytest.mark.parametrize(("tolerations", "allowed"), [
    ([{"operator": "Exists"}], True),
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}], True),
    ([{"operator": "Exists", "effect": "NoSchedule"}], True),
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
       "effect": "NoExecute"}], False),
])
def test_a_cordoned_node_takes_a_pod_that_tolerates_the_cordon(
        tolerations: list[dict[str, Any]], allowed: bool) -> None:
    """As the scheduler's NodeUnschedulable filter: the node need not carry the taint."""
    pod = member("g", 0, tolerations=tolerations)
    assert eligible(pod, node("n", None, unschedulable=True)) is allowed
    assert not eligible(pod, node("n", None, unschedulable=True, ready="False"))
