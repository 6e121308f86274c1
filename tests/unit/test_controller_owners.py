"""Gang sizes read from owner objects, and the patch that lifts a gate."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from webhook.controller.applying import ungate_patch
from webhook.controller.deciding import Record
from webhook.controller.objects import PodInfo
from webhook.controller.owners import size_of
from webhook.keys import GANG_LABEL, GATE


def info(labels: dict[str, str] | None = None, **spec: Any) -> PodInfo:
    return PodInfo.parse({"metadata": {"name": "p", "namespace": "ml",
                                       "labels": {GANG_LABEL: "g", **(labels or {})}},
                          "spec": spec})


@pytest.mark.parametrize(("source", "owner", "labels", "size"), [
    ("indexed-job", {"spec": {"parallelism": 4, "completions": 8}}, {}, 4),
    ("indexed-job", {"spec": {"parallelism": 8, "completions": 2}}, {}, 2),
    ("kubeflow", {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                                   "Worker": {"replicas": 7}}}}, {}, 8),
    ("kubeflow", {"spec": {"mpiReplicaSpecs": {"Launcher": {}, "Worker": {"replicas": 4}}}},
     {}, 5),
    ("jobset", {"spec": {"replicatedJobs": [
        {"name": "driver", "replicas": 1},
        {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}}]}},
     {"jobset.sigs.k8s.io/replicatedjob-name": "workers"}, 8),
    ("podgroup", {"spec": {"minMember": 6}}, {}, 6),
    ("kuberay", {"spec": {"workerGroupSpecs": [{"replicas": 3}, {"replicas": 2}]}}, {}, 6),
])
def test_sizes_from_owners(source: str, owner: dict[str, Any], labels: dict[str, str],
                           size: int) -> None:
    assert size_of(source, owner, info(labels)) == size


@pytest.mark.parametrize(("source", "owner", "labels", "message"), [
    ("kubeflow", {"spec": {}}, {}, "no replica specs"),
    ("jobset", {"spec": {"replicatedJobs": []}},
     {"jobset.sigs.k8s.io/replicatedjob-name": "w"}, "no replicated job"),
    ("podgroup", {"spec": {}}, {}, "no minMember"),
])
def test_owners_that_state_no_size_say_why(source: str, owner: dict[str, Any],
                                           labels: dict[str, str], message: str) -> None:
    size = size_of(source, owner, info(labels))
    assert isinstance(size, str)
    assert message in size


@pytest.mark.parametrize("node_selector", [None, {"gpu": "h100"}])
def test_ungate_patch_lifts_only_our_gate_and_pins_the_domain(
        node_selector: dict[str, str] | None) -> None:
    spec: dict[str, Any] = {"schedulingGates": [{"name": "other/gate"}, {"name": GATE}]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}},
           "spec": spec}
    record = Record("clique-3", "nvidia.com/gpu.clique", ("p",), 0.0)
    out = jsonpatch.apply_patch(pod, ungate_patch(PodInfo.parse(pod), record))
    assert out["spec"]["schedulingGates"] == [{"name": "other/gate"}]
    assert out["spec"]["nodeSelector"] == {**(node_selector or {}),
                                           "nvidia.com/gpu.clique": "clique-3"}


def test_ungate_patch_refuses_when_the_gates_moved() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}},
           "spec": {"schedulingGates": [{"name": GATE}]}}
    patch = ungate_patch(PodInfo.parse(pod), Record(None, None, ("p",), 0.0))
    moved = {**pod, "spec": {"schedulingGates": [{"name": "other/gate"}]}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(moved, patch)


@pytest.mark.parametrize("annotations", [None, {"gpu-airlock.io/rule": "kubeflow"}])
def test_record_and_anchor_ungate_are_one_patch(annotations: dict[str, str] | None) -> None:
    from webhook.controller.applying import record_patch
    from webhook.keys import PLACEMENT_ANNOTATION
    meta: dict[str, Any] = {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}}
    if annotations:
        meta["annotations"] = dict(annotations)
    pod = {"metadata": meta, "spec": {"schedulingGates": [{"name": GATE}]}}
    record = Record("clique-1", "nvidia.com/gpu.clique", ("p", "q"), 5.0)
    info = PodInfo.parse(pod)
    out = jsonpatch.apply_patch(pod, record_patch(info, record) + ungate_patch(info, record))
    assert Record.loads(out["metadata"]["annotations"][PLACEMENT_ANNOTATION]) == record
    assert out["metadata"]["annotations"].items() >= (annotations or {}).items()
    assert out["spec"]["schedulingGates"] == []
