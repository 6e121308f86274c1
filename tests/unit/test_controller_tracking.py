"""The tracked cluster is kept current event by event: whatever order pods and nodes come,
change and go in, it must equal the cluster tracked from scratch from what is left, and
a round over it must leave it as it was."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.builders import (
    CLIQUE,
    GPU,
    NEURON,
    NOW,
    POLICY_DEFAULT,
    cluster,
    gang,
    member,
    node,
    single,
    tracked,
)
from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.capacity import EVERYWHERE
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import decide
from webhook.controller.core.identities import PodKey
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo

NODES = [*cluster({"a": 2, "b": 2}), node("n-0", "c", resource=NEURON)]
NODE_NAMES = [n.name for n in NODES]


def _pods() -> list[PodInfo]:
    """Pods in every state the tracking tells apart, on known and unknown nodes."""
    out = [
        *gang("g", 2),  # gated
        member("h", 0, gated=False, node_name="a-n0"),
        member("h", 1, gated=False, node_name="a-n1", gpus=4),
        member("r", 0, gated=False, node_name="b-n0", recorded=NEURON, resource=NEURON),
        single("s", "b-n1", gpus=2),
        single("far", "gone-node", gpus=8),
        single("cpu", "a-n0", gpus=0),
    ]
    done = member("h", 2, gated=False, node_name="b-n0")
    out.append(dataclasses.replace(done, terminal=True, succeeded=True))
    leaving = member("h", 3, gated=False, node_name="b-n1")
    out.append(dataclasses.replace(leaving, deleting=True))
    return out


PODS = _pods()
Step = tuple[str, int]
steps = st.lists(st.tuples(st.sampled_from(["put_pod", "drop_pod", "put_node", "drop_node",
                                             "unready", "moved"]),
                           st.integers(min_value=0, max_value=len(PODS) - 1)),
                 max_size=40)


def _state(t: Tracked) -> dict[str, Any]:
    capacity, occupancy, membership = t.capacity, t.occupancy, t.membership
    members = {g: dict(m) for g, m in membership.members.items()}
    return {
        "pods": dict(t.pods), "nodes": dict(capacity.nodes),
        "free": {n: {k: v for k, v in f.items() if v} for n, f in capacity.free.items()},
        "free_gpu": dict(capacity.free_gpu), "capacity": capacity.total,
        "held": dict(occupancy.gpus_of),
        "namespaces": {k: v for k, v in occupancy.namespace_gpus.items() if v},
        "on_node": {n: set(k) for n, k in occupancy.on_node.items() if k},
        "holding": occupancy.holders,
        "members": members, "gated": set(membership.gated),
        "succeeded": +membership.succeeded, "deleting": +membership.deleting,
        "leaving": dict(t.leaving),
        "accelerators": t.accelerators,
        "gangs": {g: (tuple(x.members), tuple(x.records))
                  for g, x in membership.gangs().items()},
        "pending": [g.id for g in membership.pending()],
    }


def _apply(t: Tracked, pods: dict[PodKey, PodInfo], nodes: dict[str, NodeInfo],
           step: Step) -> None:
    kind, i = step
    pod = PODS[i]
    name = NODE_NAMES[i % len(NODE_NAMES)]
    if kind == "put_pod":
        pods[pod.key] = pod
        t.put_pod(pod)
    elif kind == "drop_pod":
        pods.pop(pod.key, None)
        t.drop_pod(pod.key)
    elif kind == "moved":  # the same pod, bound elsewhere (or let go)
        moved = dataclasses.replace(pod, node_name=name, gated=False)
        pods[pod.key] = moved
        t.put_pod(moved)
    elif kind == "put_node":
        nodes[name] = NODES[i % len(NODES)]
        t.put_node(nodes[name])
    elif kind == "drop_node":
        nodes.pop(name, None)
        t.drop_node(name)
    else:
        nodes[name] = dataclasses.replace(NODES[i % len(NODES)], ready=False)
        t.put_node(nodes[name])


@settings(max_examples=150, deadline=None)
@given(steps)
def test_tracking_event_by_event_equals_tracking_what_is_left(sequence: list[Step]) -> None:
    t = Tracked(POLICY_DEFAULT)
    pods: dict[PodKey, PodInfo] = {}
    nodes: dict[str, NodeInfo] = {}
    for step in sequence:
        _apply(t, pods, nodes, step)
        # Read the caches as rounds do, so later steps must keep them current.
        t.capacity.domain_rooms(PODS[0], CLIQUE)
        t.capacity.domain_rooms(PODS[0], EVERYWHERE)
        t.membership.gangs()
        t.membership.pending()
        t.room_below(2000, 4)
        t.occupancy.costs(("all",), NODE_NAMES, frozenset())
    fresh = Tracked.of(nodes.values(), pods.values(), POLICY_DEFAULT)
    assert _state(t) == _state(fresh)
    anchor = PODS[0]
    for key in (CLIQUE, "kubernetes.io/hostname", EVERYWHERE):
        assert t.capacity.domain_rooms(anchor, key) == fresh.capacity.domain_rooms(anchor, key)
        assert t.capacity.capacities(anchor, key) == fresh.capacity.capacities(anchor, key)
    assert t.capacity.eligible_nodes(anchor) == fresh.capacity.eligible_nodes(anchor)
    for priority, size in ((2000, 4), (1, 1), (100000, 8)):
        assert t.room_below(priority, size) == fresh.room_below(priority, size)
    now = NOW + 1
    for deficit in (1, 4, 8, 20):
        for spared in (frozenset(), frozenset({"ml"})):
            assert t.occupancy.costs(("all",), NODE_NAMES, spared).bound(deficit, now) \
                == fresh.occupancy.costs(("all",), NODE_NAMES, spared).bound(deficit, now)


def test_a_policy_reload_counts_the_new_accelerators_everywhere() -> None:
    pods = [single("s", "n-0", gpus=2), single("t", "n-0", gpus=1)]
    pods = [dataclasses.replace(p, requests={NEURON: p.requests[GPU], "cpu": 1}) for p in pods]
    t = tracked(NODES, pods)
    assert t.occupancy.gpus_of == {}
    t.count_as(POLICY_DEFAULT.including([NEURON]))
    assert t.occupancy.gpus_of == {PodKey("ml", "s"): 2, PodKey("ml", "t"): 1}
    assert t.capacity.free_gpu["n-0"] == 5
    assert t.capacity.total == 40


def test_a_round_leaves_the_tracked_cluster_as_it_was() -> None:
    pods = [*gang("g", 4), *gang("big", 3), single("s", "a-n0", gpus=8)]
    t = tracked(cluster({"a": 4, "b": 2}), pods)
    before = _state(t)
    free_before = {n: dict(f) for n, f in t.capacity.free.items()}
    snap = Snapshot(t)
    snap.take("b-n0", {GPU: 8})
    assert decide(t, {}, 0.0)
    assert _state(t) == before
    assert t.capacity.free == free_before


def test_a_snapshot_asked_for_domain_totals_late_counts_what_it_took_before() -> None:
    t = tracked(cluster({"a": 2, "b": 2}))
    snap = Snapshot(t)
    snap.take("a-n0", {GPU: 8})
    assert snap.domain_free(PODS[0], CLIQUE) == {"a": 8, "b": 16}
    rooms = t.capacity.domain_rooms(PODS[0], CLIQUE)
    assert {d: r.total for d, r in rooms.items()} == {"a": 16, "b": 16}


def test_room_pods_being_deleted_hold_is_used_and_given_back_once_in_a_fork() -> None:
    # kube-scheduler counts a pod marked for deletion until it is gone: so does Airlock,
    # and a what-if without it gives its room back once (a fork of that fork, which a
    # forecast's round makes, must not give it again).
    going = dataclasses.replace(single("s", "a-n0", gpus=8), deleting=True)
    t = tracked(cluster({"a": 2}), [going])
    snap = Snapshot(t)
    assert snap.free_gpu == {"a-n0": 0, "a-n1": 8}
    assert t.occupancy.gpus_of == {}  # no victim, nor its queue's usage
    gone = snap.once_gone()
    assert gone is not None
    assert gone.free_gpu == {"a-n0": 8, "a-n1": 8}
    assert gone.once_gone() is None
    assert gone.fork().once_gone() is None
    assert snap.free_gpu == {"a-n0": 0, "a-n1": 8}
    t.drop_pod(going.key)
    assert t.leaving == {}
    assert Snapshot(t).once_gone() is None


def test_counting_slices_recorded_on_pods_of_an_older_policy() -> None:
    recorded = member("r", 0, gated=False, node_name="n-0", recorded=NEURON, resource=NEURON)
    t = tracked(NODES, [recorded], Accelerators.of([GPU]))
    assert NEURON in t.accelerators.names
    assert t.capacity.free_gpu["n-0"] == 0
    t.drop_pod(recorded.key)
    assert NEURON not in t.accelerators.names


def test_the_ranked_domains_stay_in_order_as_room_is_taken_and_given_back() -> None:
    t = tracked(cluster({"a": 2, "b": 2, "c": 2}))
    snap = Snapshot(t)
    assert snap.ranked(PODS[0], CLIQUE) == [(16, "a"), (16, "b"), (16, "c")]
    for name, gpus in (("a-n0", 8), ("b-n1", 4), ("c-n0", 8), ("c-n1", 8), ("a-n0", -8),
                       ("b-n0", 2)):
        snap.take(name, {GPU: gpus})
        kept = list(snap.ranked(PODS[0], CLIQUE))
        assert kept == sorted((f, d) for d, f in snap.domain_free(PODS[0], CLIQUE).items())
    assert kept == [(0, "c"), (10, "b"), (16, "a")]
