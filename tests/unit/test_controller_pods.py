"""What the controller reads from a pod and a node: the scheduler's rules for requests
(limits as requests, init containers, sidecars, overhead) on raw JSON, and a pod's parts
(the webhook's marks, where it may go, what the controller recorded)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import GPU, SEAL, raw_member
from webhook.controller.core.constraints import UNCONSTRAINED
from webhook.controller.core.marks import UNMARKED
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import NOTHING_RECORDED, PodInfo
from webhook.controller.core.resources import pod_requests
from webhook.keys import (
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GATE,
    LEGACY_GANG_LABEL,
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
)


def c(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None,
      **extra: Any) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": "c", "resources": resources, **extra}


@pytest.mark.parametrize(("spec", "expected"), [
    # Containers add up; CPU in millicores, memory in bytes.
    ({"containers": [c({"cpu": "500m", "memory": "1Gi"}), c({"cpu": "1.5", "memory": "512Mi"})]},
     {"cpu": 2000, "memory": 3 * 2**29}),
    # A limit alone is the request (GPUs are often written that way).
    ({"containers": [c(limits={GPU: "8", "cpu": "2"})]}, {GPU: 8, "cpu": 2000}),
    # A request beside a limit wins.
    ({"containers": [c({"cpu": "1"}, {"cpu": "4"})]}, {"cpu": 1000}),
    # Init containers run one at a time: the biggest counts when above the sum.
    ({"containers": [c({"cpu": "1"}), c({"cpu": "1"})],
      "initContainers": [c({"cpu": "3"}), c({"cpu": "500m"})]}, {"cpu": 3000}),
    ({"containers": [c({"cpu": "4"})], "initContainers": [c({"cpu": "3"})]}, {"cpu": 4000}),
    # A sidecar keeps running: it adds to the app containers and to later init containers.
    ({"containers": [c({"cpu": "1"})],
      "initContainers": [c({"cpu": "1"}, restartPolicy="Always"), c({"cpu": "3"})]},
     {"cpu": 4000}),
    ({"containers": [c({"cpu": "4"})],
      "initContainers": [c({"cpu": "1"}, restartPolicy="Always"), c({"cpu": "3"})]},
     {"cpu": 5000}),
    # Overhead comes on top; any extended resource is counted like GPUs.
    ({"containers": [c({"cpu": "1", "example.com/foo": "2"})],
      "overhead": {"cpu": "250m", "memory": "120Mi"}},
     {"cpu": 1250, "example.com/foo": 2, "memory": 120 * 2**20}),
    # Fractions round up, as the scheduler's milli-values do.
    ({"containers": [c({"cpu": "0.0001", "memory": "1.5"})]}, {"cpu": 1, "memory": 2}),
    # A quantity that is not one counts as nothing rather than stopping the controller.
    ({"containers": [c({"cpu": "lots"})]}, {"cpu": 0}),
    ({}, {}),
])
def test_pod_requests_follow_the_scheduler(spec: dict[str, Any], expected: dict[str, int]
                                           ) -> None:
    assert pod_requests(spec) == expected


def test_pod_view_of_a_pod_outside_any_gang_keeps_only_capacity() -> None:
    info = PodInfo.parse({"metadata": {"name": "web", "namespace": "a", "labels": {"x": "y"}},
                          "spec": {"nodeName": "n1", "nodeSelector": {"a": "b"},
                                   "containers": [c({"cpu": "1"})]},
                          "status": {"phase": "Running"}})
    assert info.gang_id is None
    assert info.node_name == "n1"
    assert info.active
    assert info.labels == {}
    assert info.constraints.node_selector == {}
    assert info.requests == {"cpu": 1000}


@pytest.mark.parametrize("label", [GANG_LABEL, LEGACY_GANG_LABEL])
def test_a_gang_is_read_by_its_label_and_by_the_label_earlier_versions_wrote(label: str
                                                                            ) -> None:
    info = PodInfo.parse({"metadata": {"name": "w-0", "namespace": "a",
                                       "labels": {label: "train"}},
                          "spec": {"schedulingGates": [{"name": GATE}],
                                   "containers": [c({GPU: "8"})]}})
    assert info.marks.gang == "train"
    assert info.gated


@pytest.mark.parametrize(("raw", "active"), [
    ({"status": {"phase": "Succeeded"}}, False),
    ({"status": {"phase": "Failed"}}, False),
    ({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, False),
    ({"status": {"phase": "Pending"}}, True),
])
def test_finished_and_deleting_pods_hold_nothing(raw: dict[str, Any], active: bool) -> None:
    obj = {"metadata": {"name": "p", "namespace": "a", **raw.get("metadata", {})},
           "spec": {}, "status": raw.get("status", {})}
    assert PodInfo.parse(obj).active is active


def test_node_view_reads_readiness_taints_and_allocatable() -> None:
    n = NodeInfo.parse({"metadata": {"name": "n", "labels": {"k": "v"}},
                        "spec": {"unschedulable": True,
                                 "taints": [{"key": "t", "effect": "NoSchedule"}]},
                        "status": {"allocatable": {GPU: "8", "memory": "2Gi"},
                                   "conditions": [{"type": "Ready", "status": "False"}]}})
    assert (n.ready, n.unschedulable, n.allocatable) == (False, True, {GPU: 8, "memory": 2**31})
    assert n.taints == ({"key": "t", "effect": "NoSchedule"},)


@pytest.mark.parametrize(("deleting", "message", "expected"), [
    # Airlock's own condition on a pod going: what the next leader tells, should the
    # Event have been lost with the last one.
    (True, "Preempted: a gang of higher priority needs the room", "Preempted: a gang of "
     "higher priority needs the room"),
    (True, "Requeued: the gang has 1 of its 2 members", "Requeued: the gang has 1 of its "
     "2 members"),
    # Another's eviction, or a pod not going: nothing to tell.
    (True, "Eviction API: evicting", None),
    (False, "Preempted: a gang of higher priority needs the room", None),
])
def test_an_eviction_of_airlocks_under_way_is_read_from_the_pods_condition(
        deleting: bool, message: str, expected: str | None) -> None:
    raw: dict[str, Any] = {
        "metadata": {"name": "p", "namespace": "ml", "uid": "u1"},
        "spec": {"containers": [c(limits={GPU: "8"})]},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True",
                                   "reason": "PreemptionByScheduler", "message": message}]}}
    if deleting:
        raw["metadata"]["deletionTimestamp"] = "2026-11-26T00:00:00Z"
    assert PodInfo.parse(raw).recorded.evicted_for == expected


def test_a_pod_airlock_does_not_decide_shares_its_empty_parts() -> None:
    """Most of a large cluster's pods: one value of each part for all of them."""
    info = PodInfo.parse({"metadata": {"name": "web", "namespace": "a",
                                       "annotations": {"note": "x"}},
                          "spec": {"tolerations": [{"operator": "Exists"}],
                                   "containers": [c({GPU: "1"})]}}, SEAL)
    assert info.marks is UNMARKED
    assert info.constraints is UNCONSTRAINED
    assert info.recorded is NOTHING_RECORDED


def test_the_first_mark_out_of_bounds_is_the_one_a_gang_is_told() -> None:
    info = PodInfo.parse(raw_member("g", 0, size=2, marks={
        SLICE_EXPECTED_SIZE_ANNOTATION: "0", SLICE_INDEX_ANNOTATION: "-1",
        GANG_EXPECTED_SIZE_ANNOTATION: "9" * 50}), SEAL)
    assert info.invalid is not None
    assert GANG_EXPECTED_SIZE_ANNOTATION in info.invalid
    assert (info.marks.expected_size, info.marks.slice_size, info.marks.slice_index) == \
        (None, None, None)
