"""Capacity requests, decided without a cluster: which gangs ask the cluster to grow, what
becomes of the placeholders there are, and what a placeholder looks like."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import CLIQUE, NOW, TRAINING, cluster, gang, member, running, tracked, unit
from webhook.controller.core.actions import Action, Admit, Wait
from webhook.controller.core.deciding import DecideOptions, decide
from webhook.controller.core.growth.asking import (
    Asking,
    CapacitySettings,
    grow,
)
from webhook.controller.core.growth.placeholders import digest, manifest, placeholder_of, too_small
from webhook.controller.core.growth.provisioning import consuming, objects, request_of
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.queueing import QueueState
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.records import Record
from webhook.keys import PLACEHOLDER_LABEL, PLACEHOLDER_PRIORITY_CLASS, SYSTEM_NAMESPACE
from webhook.operators.clusterautoscaler.keys import CLASS_ANNOTATION, CONSUME_ANNOTATION

SETTINGS = CapacitySettings(timeout=600.0, backoff=300.0)
TEAMS = Quotas([QueueSpec("a", ("team-a",), 64), QueueSpec("b", ("team-b",), 64)])


def waiting(name: str, ns: str = "team-a", may_grow: bool = True, size: int = 2) -> Wait:
    return Wait(unit(name, ns), tuple(gang(name, size, ns=ns)), "NoDomainFits", "",
                may_grow=may_grow)


def admitted(name: str, ns: str = "team-a") -> Admit:
    pods = tuple(gang(name, 2, ns=ns))
    return Admit(unit(name, ns), Record("clique-0", None, (), NOW, 2), pods[0], pods, 16)


def held(name: str, ns: str = "team-a", age: float = 60.0, count: int = 2
         ) -> list[Asking]:
    return [Asking(f"ph-{name}-{i}", unit(name, ns), NOW - age) for i in range(count)]


def outcome(actions: list[Action], there: list[Asking],
            failed: dict[UnitId, float] | None = None) -> dict[str, Any]:
    growth = grow(actions, TEAMS, there, failed or {}, NOW, SETTINGS)
    return {"make": [r.unit.name for r in growth.make],
            "release": {r.unit.name: r.ending for r in growth.release},
            "backing_off": sorted(u.name for u in growth.backing_off)}


@pytest.mark.parametrize(("actions", "there", "failed", "expected"), [
    pytest.param([waiting("g1")], [], None,
                 {"make": ["g1"], "release": {}, "backing_off": []}, id="the head asks"),
    pytest.param([waiting("g1"), waiting("g2")], [], None,
                 {"make": ["g1"], "release": {}, "backing_off": []},
                 id="one gang per queue: the head"),
    pytest.param([waiting("g1"), waiting("g2", "team-b")], [], None,
                 {"make": ["g1", "g2"], "release": {}, "backing_off": []},
                 id="each queue's head"),
    pytest.param([waiting("g1", may_grow=False)], [], None,
                 {"make": [], "release": {}, "backing_off": []},
                 id="a gang its queue may not admit asks nothing"),
    pytest.param([waiting("g1")], held("g1"), None,
                 {"make": [], "release": {}, "backing_off": []},
                 id="a request open: kept, not made twice"),
    pytest.param([admitted("g1")], held("g1"), None,
                 {"make": [], "release": {"g1": "provisioned"}, "backing_off": []},
                 id="admitted: provisioned"),
    pytest.param([], held("g1"), None,
                 {"make": [], "release": {"g1": "withdrawn"}, "backing_off": []},
                 id="gone (a crash left them): withdrawn"),
    pytest.param([waiting("g1")], held("g1", age=601), None,
                 {"make": [], "release": {"g1": "expired"}, "backing_off": ["g1"]},
                 id="expired: removed, and it backs off"),
    pytest.param([waiting("g1")], [], {unit("g1", "team-a"): NOW - 100},
                 {"make": [], "release": {}, "backing_off": ["g1"]},
                 id="backing off: asks nothing"),
    pytest.param([waiting("g1")], [], {unit("g1", "team-a"): NOW - 301},
                 {"make": ["g1"], "release": {}, "backing_off": []},
                 id="the backoff over: asks again"),
])
def test_which_gangs_ask_and_what_ends(actions: list[Action], there: list[Asking],
                                       failed: dict[UnitId, float] | None,
                                       expected: dict[str, Any]) -> None:
    assert outcome(actions, there, failed) == expected


@pytest.mark.parametrize(("quotas", "size", "grows"), [
    # No queues: borrowing is bounded only by today's idle GPUs, which growth adds to.
    (Quotas(), 4, True),
    (Quotas([QueueSpec("capped", ("ml",), 24, 0)]), 3, True),
    (Quotas([QueueSpec("capped", ("ml",), 24, 0)]), 4, False),
    (Quotas([QueueSpec("capped", ("ml",), 16, 16)]), 4, True),
])
def test_a_gang_its_queue_would_admit_may_grow_the_cluster(quotas: Quotas, size: int,
                                                            grows: bool) -> None:
    """decide marks the wait: the cluster (one domain of 2 nodes, 16 GPUs) can never hold
    gangs of 3 or 4 whole nodes."""
    nodes = cluster({"clique-0": 2})
    actions = decide(tracked(nodes, gang("big", size)), {}, NOW, DecideOptions(),
                     QueueState(quotas=quotas))
    (wait,) = [a for a in actions if isinstance(a, Wait)]
    assert wait.may_grow is grows


@pytest.mark.parametrize(("going", "grows"), [(True, False), (False, True)])
def test_a_gang_that_fits_in_room_being_freed_does_not_grow_the_cluster(
        going: bool, grows: bool) -> None:
    # Pods being deleted free a domain within their grace period: nodes asked for now
    # would come after it, for nothing. Running pods of higher priority free nothing.
    nodes = cluster({"clique-0": 2})
    there = running("s", ["clique-0-n0", "clique-0-n1"], priority=TRAINING * 2)
    if going:
        there = [dataclasses.replace(p, deleting=True) for p in there]
    actions = decide(tracked(nodes, there + gang("big", 2, priority=TRAINING)), {}, NOW)
    (wait,) = [a for a in actions if isinstance(a, Wait)]
    assert wait.may_grow is grows


def pod_of(name: str) -> PodInfo:
    return member(name, 0, gpus=8, ns="team-a")


def test_a_placeholder_stands_for_its_pod_and_gives_way_to_any() -> None:
    gpu_pod = pod_of("g1")
    made = manifest(unit("g1", "team-a"), gpu_pod, 0)
    spec = made["spec"]
    assert made["metadata"]["namespace"] == SYSTEM_NAMESPACE
    assert spec["priorityClassName"] == PLACEHOLDER_PRIORITY_CLASS
    (container,) = spec["containers"]
    assert container["resources"]["requests"] == {"cpu": "8000m", "memory": str(16 * 2**30),
                                                  "nvidia.com/gpu": "8"}
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "8"}
    assert spec["tolerations"] == list(gpu_pod.constraints.tolerations)
    (together,) = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert together["topologyKey"] == gpu_pod.marks.topology_key
    assert together["labelSelector"]["matchLabels"] == {
        PLACEHOLDER_LABEL: digest(unit("g1", "team-a"))}
    # Read back, it is the unit's; and the room it holds is not counted as used.
    made["metadata"]["creationTimestamp"] = "2026-11-22T10:00:00Z"
    found = placeholder_of(made)
    assert found is not None
    assert found.unit == unit("g1", "team-a")
    assert PodInfo.parse(made).requests == {}


@pytest.mark.parametrize("change", [
    lambda m: m["metadata"].update(namespace="team-a"),  # only Airlock's namespace counts
    lambda m: m["metadata"]["labels"].clear(),
    lambda m: m["metadata"]["annotations"].update({"gpu-airlock.io/placeholder-for": "x"}),
])
def test_what_is_not_a_placeholder(change: Any) -> None:
    made = manifest(unit("g1", "team-a"), pod_of("g1"), 0)
    change(made)
    assert placeholder_of(made) is None


def test_placeholders_keep_out_of_domains_too_small_for_the_whole_gang() -> None:
    """Domains of 2 and 4 nodes (16 and 32 GPUs): a gang of 4 x 8 GPUs could never be
    whole in the first, so its placeholders ask for a domain that grows instead."""
    pods = gang("g1", 4, ns="team-a")
    avoid = too_small(cluster({"clique-0": 2, "clique-1": 4}), CLIQUE, pods)
    assert avoid == ["clique-0"]
    terms = manifest(unit("g1", "team-a"), pods[0], 0, avoid)["spec"]["affinity"][
        "nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [
        {"key": CLIQUE, "operator": "NotIn", "values": ["clique-0"]}]}]


def test_a_request_the_autoscaler_gave_up_on_fails_and_backs_off() -> None:
    there = [Asking("airlock-x", unit("g1", "team-a"), NOW - 5, "Failed: no room")]
    growth = grow([waiting("g1")], TEAMS, there, {}, NOW, SETTINGS)
    (release,) = growth.release
    assert (release.ending, release.why) == ("failed", "Failed: no room")
    assert growth.make == ()
    assert list(growth.backing_off) == [unit("g1", "team-a")]


def test_a_provisioning_request_names_a_template_per_kind_of_pod() -> None:
    pods = [*gang("g1", 3, ns="team-a"), member("g1", 3, gpus=4, size=4, ns="team-a")]
    *templates, request = objects(unit("g1", "team-a"), pods, "check-capacity.x")
    assert [t["kind"] for t in templates] == ["PodTemplate", "PodTemplate"]
    assert request["spec"] == {"provisioningClassName": "check-capacity.x", "podSets": [
        {"podTemplateRef": {"name": templates[0]["metadata"]["name"]}, "count": 3},
        {"podTemplateRef": {"name": templates[1]["metadata"]["name"]}, "count": 1}]}
    # Read back: open, then failed once the autoscaler says so.
    request["metadata"]["creationTimestamp"] = "2026-11-22T10:00:00Z"
    found = request_of(request)
    assert found is not None
    assert (found.unit, found.failed) == (unit("g1", "team-a"), None)
    request["status"] = {"conditions": [
        {"type": "Provisioned", "status": "False"},
        {"type": "BookingExpired", "status": "True", "message": "pods came too late"}]}
    found = request_of(request)
    assert found is not None
    assert found.failed == "BookingExpired: pods came too late"
    assert dict(consuming(unit("g1", "team-a"), "check-capacity.x")) == {
        CONSUME_ANNOTATION: request["metadata"]["name"], CLASS_ANNOTATION: "check-capacity.x"}


@pytest.mark.parametrize("forge", [
    lambda r: r["metadata"].update(namespace="mallory"),  # names a gang elsewhere
    lambda r: r["metadata"].update(name="not-airlocks"),
])
def test_a_request_counts_only_in_its_gangs_namespace_under_its_name(forge: Any) -> None:
    *_, request = objects(unit("g1", "team-a"), gang("g1", 2, ns="team-a"), "c")
    assert request_of(request) is not None
    forge(request)
    assert request_of(request) is None
