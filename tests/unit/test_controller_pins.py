"""Placements that hold: each pod let go is pinned to the node its gang's plan gave it, so
kube-scheduler's scoring (its default spreads small pods) cannot put it on room the plan
counted on for others; the record keeps the nodes, so a new leader pins the rest the same
way; and a pod pinned to a node that can no longer take it before it is bound is
re-planned (evicted, made again by its owner, decided afresh)."""

from __future__ import annotations

import dataclasses
from typing import Any

import jsonpatch
import pytest
from kubernetes_asyncio import client

from tests.builders import (
    CLIQUE,
    NOW,
    SEAL,
    cluster,
    let_go,
    node,
    raw_member,
    running,
    told,
    tracked,
)
from webhook.controller.core.cluster.filters import eligible
from webhook.controller.core.deciding import (
    Action,
    Admit,
    DecideOptions,
    Finish,
    Record,
    Replan,
    decide,
)
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.placement.pins import PIN_MODES, PinMode
from webhook.controller.core.pods import PodInfo
from webhook.controller.shells.applying import Applier
from webhook.controller.shells.patches import ungate_patch
from webhook.policy.model import Policy
from webhook.simulation.clusters import Shape
from webhook.simulation.simulating import simulate
from webhook.simulation.traces import Job

NODES = cluster({"a": 4})
PINS = DecideOptions()
# A pod beside the gangs, leaving 3 GPUs on a-n2.
BUSY = running("busy", ["a-n2"], gpus=5)


def _raws(sizes: tuple[int, ...], **kw: Any) -> list[dict[str, Any]]:
    """Gang `g`, one pod of each of `sizes` GPUs, made by a Job."""
    return [raw_member("g", i, gpus, len(sizes), owned=True, **kw)
            for i, gpus in enumerate(sizes)]


def _parsed(raws: list[dict[str, Any]]) -> list[PodInfo]:
    return [PodInfo.parse(r, SEAL) for r in raws]


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


def _named(node: str) -> dict[str, Any]:
    """A term that allows only `node`, by name."""
    return {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}


def _admit(actions: list[Action]) -> Admit:
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    return admit


def _lifted(raws: list[dict[str, Any]], options: DecideOptions = PINS
            ) -> tuple[Record, list[PodInfo]]:
    """The gang of `raws` admitted on NODES beside BUSY, and its pods as the applier
    leaves them: let go, pinned, not bound yet."""
    pods = _parsed(raws)
    admit = _admit(decide(tracked(NODES, [*BUSY, *pods]), {}, NOW, options))
    return admit.record, [let_go(r, admit.record, anchor=p.key == admit.anchor.key)
                          for r, p in zip(raws, pods, strict=True)]


# --- the plan's nodes, recorded ----------------------------------------------------------

def test_small_pods_are_pinned_where_the_plan_packs_them() -> None:
    """Best fit, largest first: the 4 on the first empty node, the 2 and a 1 into the 3
    GPUs left beside a running pod, the other 1 beside the 4. The scheduler's default
    scoring would have taken the emptiest nodes, a-n1 and a-n3."""
    pods = _parsed(_raws((4, 2, 1, 1)))
    record = _admit(decide(tracked(NODES, [*BUSY, *pods]), {}, NOW)).record
    assert dict(record.nodes) == {"g-0": "a-n0", "g-1": "a-n2", "g-2": "a-n2", "g-3": "a-n0"}


def test_under_pin_domain_nothing_is_pinned_to_a_node() -> None:
    pods = _parsed(_raws((4, 2, 1, 1)))
    options = DecideOptions(pin="domain")
    assert _admit(decide(tracked(NODES, pods), {}, NOW, options)).record.nodes == ()


def test_a_pod_that_names_its_node_is_not_sent_to_another() -> None:
    """Its choice is its own. A pod no owner makes again is recorded with its planned
    node, which it only prefers (`test_controller_steering`)."""
    raws = _raws((2, 2, 2))
    raws[0]["metadata"].pop("ownerReferences")
    raws[1]["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "a-n3"}
    record = _admit(decide(tracked(NODES, _parsed(raws)), {}, NOW)).record
    assert dict(record.nodes) == {"g-0": "a-n0", "g-2": "a-n0"}


def test_the_record_keeps_the_nodes_and_an_old_record_reads_without_them() -> None:
    record = Record("a", CLIQUE, ("g-0", "g-1"), NOW, 2,
                    nodes=(("g-0", "a-n0"), ("g-1", "a-n2")))
    assert Record.of(record.body()) == record
    assert SEAL.loads("placement", SEAL.dumps(record, "uid"), "uid", NOW) == record
    assert record.node_of("g-1") == "a-n2"
    old = Record("a", CLIQUE, ("g-0",), NOW, 1)
    assert "nodes" not in old.body()
    assert Record.of(old.body()).nodes == ()


# --- the ungate patch -------------------------------------------------------------------

def test_the_ungate_patch_pins_the_pod_to_its_node_by_name() -> None:
    record, pods = _lifted(_raws((4, 2, 1, 1)))
    for pod in pods:
        planned = record.node_of(pod.name)
        assert pod.constraints.pinned == planned
        assert [n.name for n in NODES if eligible(pod, n)] == [planned]
        # Still pinned to its domain too, by the label, as before.
        assert pod.constraints.node_selector == {CLIQUE: "a"}


def test_the_pin_narrows_each_of_the_pods_own_required_terms() -> None:
    own = {"key": "gpu", "operator": "In", "values": ["h100"]}
    raw = _raws((8,))[0]
    raw["spec"]["affinity"] = _required({"matchExpressions": [own]})
    record = Record("a", CLIQUE, ("g-0",), NOW, 1, nodes=(("g-0", "a-n1"),),
                    fenced_off=("a-n2",))
    out = jsonpatch.apply_patch(raw, ungate_patch(PodInfo.parse(raw, SEAL), record))
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # The pin alone: it is narrower than the fence, which the plan kept it off anyway.
    assert terms == [{"matchExpressions": [own], "matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a-n1"]}]}]


def test_a_pod_pinned_by_two_terms_to_two_nodes_is_pinned_to_none() -> None:
    raw = _raws((8,))[0]
    raw["spec"]["affinity"] = _required(*(_named(n) for n in ("a-n0", "a-n1")))
    assert PodInfo.parse(raw, SEAL).constraints.pinned is None


# --- a new leader finishing the lift ----------------------------------------------------

def _half_lifted(nodes: list[NodeInfo]) -> list[Action]:
    """Gang g of four 4-GPU pods recorded on a-n0 and a-n1; the leader died after
    letting go (and the scheduler binding) g-0 and g-1; a new leader's round on
    `nodes`."""
    record = Record("a", CLIQUE, tuple(f"g-{i}" for i in range(4)), NOW - 5, 4,
                    nodes=(("g-0", "a-n0"), ("g-1", "a-n1"), ("g-2", "a-n0"),
                           ("g-3", "a-n1")))
    bound = [PodInfo.parse(raw_member("g", i, 4, 4, owned=True, gated=False,
                                      node_name=f"a-n{i}",
                                      placement=record if i == 0 else None), SEAL)
             for i in range(2)]
    gated = _parsed([raw_member("g", i, 4, 4, owned=True) for i in (2, 3)])
    return decide(tracked(nodes, [*bound, *gated]), {}, NOW)


def test_a_new_leader_pins_the_promised_members_to_their_recorded_nodes() -> None:
    (finish,) = [a for a in _half_lifted(NODES) if isinstance(a, Finish)]
    assert [p.name for p in finish.ungate] == ["g-2", "g-3"]
    assert dict(finish.record.nodes) == {"g-2": "a-n0", "g-3": "a-n1"}
    raw = raw_member("g", 3, 4, 4, owned=True)
    out = PodInfo.parse(jsonpatch.apply_patch(raw, ungate_patch(
        PodInfo.parse(raw, SEAL), finish.record)), SEAL)
    assert out.constraints.pinned == "a-n1"


def test_a_promised_member_whose_node_no_longer_takes_it_is_pinned_to_its_domain() -> None:
    nodes = [node("a-n1", "a", ready="False") if n.name == "a-n1" else n for n in NODES]
    (finish,) = [a for a in _half_lifted(nodes) if isinstance(a, Finish)]
    assert dict(finish.record.nodes) == {"g-2": "a-n0"}


# --- re-planned when the node fails the pin ---------------------------------------------

def _replans(nodes: list[NodeInfo], pods: list[PodInfo], now: float = NOW + 1
             ) -> dict[str, str]:
    return {a.pod.name: told(a) for a in decide(tracked(nodes, [*BUSY, *pods]), {}, now)
            if isinstance(a, Replan)}


def _with(name: str, **changed: Any) -> list[NodeInfo]:
    """NODES, with node `name` made again with `changed` (`node()`'s keywords)."""
    return [node(name, "a", **changed) if n.name == name else n for n in NODES]


FAILED = [
    ("NotReady", _with("a-n0", ready="False"), "is NotReady"),
    ("deleted", [n for n in NODES if n.name != "a-n0"], "is gone"),
    ("cordoned", _with("a-n0", unschedulable=True), "is cordoned"),
    ("tainted", _with("a-n0", taints=[{"key": "maintenance", "effect": "NoSchedule"}]),
     "no longer takes it"),
]


@pytest.mark.parametrize(("nodes", "why"), [f[1:] for f in FAILED], ids=[f[0] for f in FAILED])
def test_a_pod_pinned_to_a_node_that_fails_it_before_binding_is_replanned(
        nodes: list[NodeInfo], why: str) -> None:
    record, pods = _lifted(_raws((4, 2, 1, 1)))
    on_n0 = {name for name, n in record.nodes if n == "a-n0"}
    replans = _replans(nodes, pods)
    assert set(replans) == on_n0 == {"g-0", "g-3"}
    assert all(m.startswith(f"Replanned: node a-n0, where Airlock pinned it, {why}")
               for m in replans.values())


def test_a_pod_pinned_to_a_node_that_still_takes_it_waits_there() -> None:
    _, pods = _lifted(_raws((4, 2, 1, 1)))
    assert _replans(NODES, pods) == {}
    # Its room is held there: a 4-GPU pod that would take the first of the emptiest
    # nodes, a-n0 but for them, goes to the next.
    newcomer = PodInfo.parse(raw_member("h", 0, 4, 1, owned=True), SEAL)
    admit = _admit(decide(tracked(NODES, [*BUSY, *pods, newcomer]), {}, NOW + 1))
    assert admit.record.node_of("h-0") == "a-n1"


def test_pods_airlock_did_not_pin_to_a_node_are_never_replanned() -> None:
    """Pinned to the domain only (`--pin domain`), or by their own choice of node."""
    raws = _raws((4, 4))
    raws[1]["spec"]["affinity"] = _required(_named("a-n0"))
    record, pods = _lifted(raws)
    assert dict(record.nodes) == {"g-0": "a-n0"}
    assert set(_replans(_with("a-n0", ready="False"), pods)) == {"g-0"}
    _, domain_only = _lifted(_raws((4, 4)), options=DecideOptions(pin="domain"))
    assert _replans(_with("a-n0", ready="False"), domain_only) == {}


def test_a_pod_whose_node_filled_up_is_replanned_once_its_room_is_no_longer_held() -> None:
    """The room was held for it while the reservation lasted; a pod bound there since
    (by another scheduler, or by name) leaves it none."""
    record, pods = _lifted(_raws((8,)))
    assert record.node_of("g-0") == "a-n0"
    squatter = PodInfo.parse(raw_member("other", 0, 8, 1, gated=False, node_name="a-n0"),
                             SEAL)
    assert _replans(NODES, [*pods, squatter], NOW + 60) == {}
    (why,) = _replans(NODES, [*pods, squatter], NOW + 121).values()
    assert "is too full of pods bound there to take it" in why


@pytest.mark.parametrize("owned", [True, False], ids=["pinned", "steered (a bare pod)"])
def test_room_a_pod_bound_first_frees_on_a_let_go_pods_node_is_the_let_go_pods(
        owned: bool) -> None:
    """A serving pod kube-scheduler bound on a-n0 before the 8-GPU member let go there
    could take it leaves 4 GPUs: while the member's room is held, a 4-GPU pod that fits
    best there goes elsewhere, or the member would wait for both to end. A steered one
    binds elsewhere at once if its domain has room; its room is held where it waits."""
    record, pods = _lifted([raw_member("g", 0, 8, 1, owned=owned)])
    assert record.node_of("g-0") == "a-n0"
    first = PodInfo.parse(raw_member("serving", 0, 4, 1, gated=False, node_name="a-n0"), SEAL)
    newcomer = PodInfo.parse(raw_member("h", 0, 4, 1, owned=True), SEAL)
    admit = _admit(decide(tracked(NODES, [*BUSY, *pods, first, newcomer]), {}, NOW + 1))
    assert admit.record.node_of("h-0") != "a-n0"


# --- the applier ------------------------------------------------------------------------

class _Response:
    status, reason = 201, "Created"

    async def __aenter__(self) -> _Response:
        return self

    async def __aexit__(self, *_: object) -> None:
        return None

    async def read(self) -> bytes:
        return b"{}"


class _Pods:
    def __init__(self) -> None:
        self.evicted: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.status_patched: list[str] = []

    async def create_namespaced_pod_eviction(self, _name: str, _namespace: str, body: Any,
                                             **_: Any) -> _Response:
        self.evicted.append(body)
        return _Response()

    async def patch_namespaced_pod_status(self, name: str, *_: Any, **__: Any) -> _Response:
        self.status_patched.append(name)
        return _Response()

    async def create_namespaced_event(self, _namespace: str, body: Any, **_: Any
                                      ) -> _Response:
        self.events.append(body)
        return _Response()


async def test_the_applier_evicts_a_replanned_pod_by_its_uid_and_says_why() -> None:
    _, pods = _lifted(_raws((8,)))
    actions = [a for a in decide(tracked(_with("a-n0", ready="False"), [*BUSY, *pods]), {},
                                 NOW + 1) if isinstance(a, Replan)]
    assert len(actions) == 1
    fake = _Pods()
    async with client.ApiClient() as api:
        applier = Applier(api, lambda _: None, "me", SEAL)
        applier.core = fake
        await applier.apply(list(actions))
    assert [e["deleteOptions"]["preconditions"]["uid"] for e in fake.evicted] == \
        [pods[0].uid]
    # Not marked as preempted: the eviction's own condition says it was evicted.
    assert fake.status_patched == []
    assert [e["reason"] for e in fake.events] == ["Replanned"]


# --- the simulation ---------------------------------------------------------------------

@pytest.mark.parametrize("pin", PIN_MODES)
@pytest.mark.parametrize("scoring", ["LeastAllocated", "MostAllocated"])
def test_pins_keep_a_gang_admitted_beside_small_pods_whole(
        policy: Policy, pin: PinMode, scoring: str) -> None:
    """Two gangs admitted in one round on three nodes: a, two 4-GPU pods, planned on
    node 0; b, two 8-GPU pods, on nodes 1 and 2. Spread by the scheduler, a would take a
    node of b's, and one pod of b hold its 8 GPUs until a ended (800 GPU-seconds under
    `LeastAllocated` before fences): pinned to their nodes, or only to the domain but
    fenced off b's, a's pods go to node 0."""
    jobs = [Job("a", 0, "ml", "training", 2, 4, 100), Job("b", 0, "ml", "training", 2, 8, 50)]
    shape = Shape(nodes=3, gpus_per_node=8, nodes_per_domain=3, scoring=scoring)
    run = simulate(jobs, policy, shape, "airlock", DecideOptions(pin=pin))
    assert run.summary()["partialGangGpuSeconds"] == 0


def test_a_pod_let_go_pinned_and_not_bound_keeps_rounds_coming() -> None:
    """With nothing gated, a round is still due while its node may fail it."""
    _, pods = _lifted(_raws((8,)))
    cluster = tracked(NODES, pods)
    assert cluster.membership.pinned == {pods[0].key}
    cluster.put_pod(dataclasses.replace(pods[0], node_name="a-n0"))
    assert cluster.membership.pinned == set()


def test_a_pod_that_names_a_full_node_itself_holds_no_room_there() -> None:
    """Only Airlock's record may hold room past what a node has free: a member that names
    a-n0 in its own affinity, where a serving pod now leaves 4 GPUs, holds nothing there,
    and a 4-GPU pod that fits best on a-n0 goes there."""
    raws = [raw_member("g", 0, 8, 1, owned=True)]
    raws[0]["spec"]["affinity"] = _required(_named("a-n0"))
    record, pods = _lifted(raws)
    assert dict(record.nodes) == {}
    first = PodInfo.parse(raw_member("serving", 0, 4, 1, gated=False, node_name="a-n0"), SEAL)
    newcomer = PodInfo.parse(raw_member("h", 0, 4, 1, owned=True), SEAL)
    admit = _admit(decide(tracked(NODES, [*BUSY, *pods, first, newcomer]), {}, NOW + 1))
    assert admit.record.node_of("h-0") == "a-n0"
