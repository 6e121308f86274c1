"""Gang sizes read from owner objects through each convention's pure lookup, and the
patch that lifts a gate."""

from __future__ import annotations

import asyncio
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from tests.builders import CLIQUE, SEAL, PodBuilder, make_policy, pod, unit
from tests.paths import ROOT
from webhook.controller.core.deciding import Record
from webhook.controller.core.pods import PodInfo
from webhook.controller.shells.owners import OwnerSizes
from webhook.controller.shells.patches import ungate_patch
from webhook.conventions.base import (
    Elastic,
    OwnerAddress,
    OwnerSized,
    SamePriority,
    SizeUnknown,
    label_value,
)
from webhook.keys import CLASS_LABEL, GANG_LABEL, GANG_SOURCE_ANNOTATION, GATE
from webhook.operators.kubeflow import keys as kubeflow
from webhook.operators.registry import CONVENTIONS, membership_of, owner_sized
from webhook.pods import PodView
from webhook.policy.classifying import classify


def EVERY(_template: Any) -> bool:
    """Every template's pods join: the size arithmetic alone."""
    return True


def owner_of(builder: PodBuilder) -> tuple[OwnerSized, OwnerAddress | SizeUnknown, PodInfo]:
    """The pod as each side sees it: the webhook's convention finds the gang, the
    controller's view (labels, ownerReferences) is what the owner lookup reads."""
    raw = builder.build()
    membership = membership_of(PodView.parse(raw))
    assert membership is not None
    # The gang label as the webhook writes it.
    raw["metadata"].setdefault("labels", {})[GANG_LABEL] = label_value(membership.name)
    convention = owner_sized(membership.source)
    assert convention is not None, f"{membership.source} has no owner lookup"
    info = PodInfo.parse(raw)
    return convention, convention.owner(info.labels, info.owners), info


# One row per convention with an owner lookup: a pod it finds, the owner that pod names,
# an object of that kind, and the size it states.
OWNERS: dict[str, tuple[PodBuilder, OwnerAddress, dict[str, Any], int]] = {
    "indexed-job": (
        pod().label("batch.kubernetes.io/job-name", "ddp")
        .label("batch.kubernetes.io/job-completion-index", "0"),
        OwnerAddress("batch", "v1", "jobs", "ddp"),
        {"spec": {"parallelism": 4, "completions": 8}}, 4),
    "kubeflow": (
        pod().label("training.kubeflow.org/job-name", "llama")
        .owner("PyTorchJob", "llama", "kubeflow.org/v1"),
        OwnerAddress("kubeflow.org", "v1", "pytorchjobs", "llama"),
        {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                          "Worker": {"replicas": 7}}}}, 8),
    "jobset": (
        pod().label("jobset.sigs.k8s.io/jobset-name", "js")
        .label("jobset.sigs.k8s.io/replicatedjob-name", "workers"),
        OwnerAddress("jobset.x-k8s.io", "v1alpha2", "jobsets", "js"),
        {"spec": {"replicatedJobs": [
            {"name": "driver", "replicas": 1},
            {"name": "workers", "replicas": 2, "template": {"spec": {"parallelism": 4}}}]}}, 8),
    "podgroup": (
        pod().label("scheduling.x-k8s.io/pod-group", "pg"),
        OwnerAddress("scheduling.x-k8s.io", "v1alpha1", "podgroups", "pg"),
        {"spec": {"minMember": 6}}, 6),
    "scheduling-group": (
        pod().set("schedulingGroup", {"podGroupName": "pg"}),
        OwnerAddress("scheduling.k8s.io", "v1beta1", "podgroups", "pg"),
        {"spec": {"schedulingPolicy": {"gang": {"minCount": 4}}}}, 4),
    "kuberay": (
        pod().label("ray.io/cluster", "rc"),
        OwnerAddress("ray.io", "v1", "rayclusters", "rc"),
        {"spec": {"headGroupSpec": {}, "workerGroupSpecs": [{"replicas": 3}, {"replicas": 2}]}},
        6),
}


def test_every_owner_lookup_has_a_row() -> None:
    assert {c.name for c in CONVENTIONS if isinstance(c, OwnerSized)} == set(OWNERS)


@pytest.mark.parametrize("source", sorted(OWNERS))
def test_each_convention_finds_its_owner_and_reads_its_size(source: str) -> None:
    builder, address, owner, size = OWNERS[source]
    convention, found, info = owner_of(builder)
    assert found == address
    assert convention.size(owner, info.labels, EVERY) == size


@pytest.mark.parametrize(("source", "builder", "owner", "size"), [
    ("indexed-job", pod().label("batch.kubernetes.io/job-name", "j")
     .label("batch.kubernetes.io/job-completion-index", "0"),
     {"spec": {"parallelism": 8, "completions": 2}}, 2),
    ("indexed-job", pod().label("batch.kubernetes.io/job-name", "j")
     .label("batch.kubernetes.io/job-completion-index", "0"), {"spec": {}}, 1),
    ("kubeflow", pod().label("training.kubeflow.org/job-name", "mpi")
     .owner("MPIJob", "mpi", "kubeflow.org/v2beta1"),
     {"spec": {"mpiReplicaSpecs": {"Launcher": {}, "Worker": {"replicas": 4}}}}, 5),
    ("kuberay", pod().label("ray.io/cluster", "rc"), {"spec": {"headGroupSpec": {}}}, 1),
])
def test_more_owner_shapes(source: str, builder: PodBuilder, owner: dict[str, Any],
                           size: int) -> None:
    convention, _, info = owner_of(builder)
    assert convention is owner_sized(source)
    assert convention.size(owner, info.labels, EVERY) == size


PYTORCH = pod().label("training.kubeflow.org/job-name", "pt").owner("PyTorchJob", "pt",
                                                                   "kubeflow.org/v1")
RAY = pod().label("ray.io/cluster", "rc")


@pytest.mark.parametrize(("builder", "owner", "size"), [
    # The Workers scale between the elasticPolicy's bounds; the Master is always needed.
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1},
                                                "Worker": {"replicas": 7}},
                        "elasticPolicy": {"minReplicas": 3, "maxReplicas": 7}}}, Elastic(8, 4)),
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 8}},
                        "elasticPolicy": {"minReplicas": 2, "maxReplicas": 16}}}, Elastic(8, 2)),
    # The operator's defaulting: a missing minimum is the maximum; both missing, the replicas.
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 8}},
                        "elasticPolicy": {"maxReplicas": 6}}}, Elastic(8, 6)),
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 8}},
                        "elasticPolicy": {}}}, 8),
    # Never more than the pods there are, nor fewer than one.
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"worker": {"replicas": 4}},
                        "elasticPolicy": {"minReplicas": 6}}}, 4),
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 4}},
                        "elasticPolicy": {"minReplicas": 0}}}, Elastic(4, 1)),
    (PYTORCH, {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}},
                        "elasticPolicy": {"minReplicas": 0}}}, 1),
    # A RayCluster's groups scale between their bounds only with the autoscaler on (the
    # CRD defaults minReplicas to 0); each replica is numOfHosts pods.
    (RAY, {"spec": {"headGroupSpec": {}, "enableInTreeAutoscaling": True, "workerGroupSpecs": [
        {"replicas": 4, "minReplicas": 1}, {"replicas": 2, "minReplicas": 2, "numOfHosts": 2}]}},
     Elastic(9, 6)),
    (RAY, {"spec": {"headGroupSpec": {}, "workerGroupSpecs": [
        {"replicas": 4, "minReplicas": 0}, {"replicas": 2, "numOfHosts": 4}]}}, 13),
    (RAY, {"spec": {"headGroupSpec": {}, "enableInTreeAutoscaling": True,
                    "workerGroupSpecs": [{"replicas": 2, "minReplicas": 2}]}}, 3),
])
def test_elastic_owners_state_their_minimum(builder: PodBuilder, owner: dict[str, Any],
                                            size: int | Elastic) -> None:
    convention, _, info = owner_of(builder)
    assert convention.size(owner, info.labels, EVERY) == size


def test_the_owner_lookup_hands_an_elastic_size_to_the_controller(
        monkeypatch: pytest.MonkeyPatch) -> None:
    owner = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 8}},
                      "elasticPolicy": {"minReplicas": 2}}}

    async def get(_where: OwnerAddress, _ns: str) -> dict[str, Any]:
        return owner

    sizes = OwnerSizes(api=None)  # no client: the GET is replaced
    monkeypatch.setattr(sizes, "_get", get)
    info = owner_of(pod().label("training.kubeflow.org/job-name", "pt")
                    .owner("PyTorchJob", "pt", "kubeflow.org/v1")
                    .annotation(GANG_SOURCE_ANNOTATION, "kubeflow"))[2]
    assert asyncio.run(sizes.lookup(unit("pt"), info, EVERY)) == Elastic(8, 2)


@pytest.mark.parametrize(("builder", "owner", "message"), [
    (pod().label("training.kubeflow.org/job-name", "pt").owner("PyTorchJob", "pt",
                                                                "kubeflow.org/v1"),
     {"spec": {}}, "no replica specs"),
    (pod().label("jobset.sigs.k8s.io/jobset-name", "js")
     .label("jobset.sigs.k8s.io/replicatedjob-name", "w"),
     {"spec": {"replicatedJobs": []}}, "no replicated job"),
    (pod().label("scheduling.x-k8s.io/pod-group", "pg"), {"spec": {}}, "no minMember"),
    (pod().set("schedulingGroup", {"podGroupName": "pg"}),
     {"spec": {"schedulingPolicy": {"basic": {}}}}, "not gang"),
    (pod().set("schedulingGroup", {"podGroupName": "pg"}),
     {"spec": {"schedulingPolicy": {"gang": {"minCount": 0}}}}, "minCount is 0"),
    (pod().label("batch.kubernetes.io/job-name", "j")
     .label("batch.kubernetes.io/job-completion-index", "0"),
     {"spec": {"parallelism": 0}}, "parallelism is 0"),
])
def test_owners_that_state_no_size_say_why(builder: PodBuilder, owner: dict[str, Any],
                                           message: str) -> None:
    convention, _, info = owner_of(builder)
    size = convention.size(owner, info.labels, EVERY)
    assert isinstance(size, SizeUnknown)
    assert message in size.reason


def test_a_kubeflow_pod_without_its_owner_reference_says_so() -> None:
    _, found, _ = owner_of(pod().label("training.kubeflow.org/job-name", "pt"))
    assert isinstance(found, SizeUnknown)
    assert "ownerReferences" in found.reason


# Owner objects are custom resources: whatever shape one has, a size function answers.
_FIELDS = ["spec", "replicas", "parallelism", "completions", "minMember", "replicatedJobs",
           "name", "template", "workerGroupSpecs", "pytorchReplicaSpecs", "Worker",
           "schedulingPolicy", "gang", "minCount"]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 9) | st.sampled_from(["workers", "x"]),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(_FIELDS), inner, max_size=4),
    max_leaves=12)


def test_the_controller_may_read_every_owner_a_convention_names() -> None:
    rbac = ROOT / "deploy" / "base" / "controller-rbac.yaml"
    role = next(d for d in yaml.safe_load_all(rbac.read_text())
                if d["kind"] == "ClusterRole" and d["metadata"]["name"] == "airlock-controller")
    readable = {(group, resource) for rule in role["rules"] if "get" in rule["verbs"]
                for group in rule["apiGroups"] for resource in rule["resources"]}
    named = {(a.group, a.plural) for _, a, _, _ in OWNERS.values()}
    named |= {(kubeflow.GROUP, plural) for plural in kubeflow.PLURALS.values()}
    assert named <= readable


def _answers(source: str, owner: dict[str, Any]) -> None:
    convention, _, info = owner_of(OWNERS[source][0])
    size = convention.size(owner, info.labels, EVERY)
    assert isinstance(size, SizeUnknown) or (isinstance(size, int) and size >= 1) or (
        isinstance(size, Elastic) and 1 <= size.minimum < size.size)


ODD = [{}, {"spec": None}, {"spec": []}, {"spec": {"parallelism": "4", "completions": None}},
       {"spec": {"replicatedJobs": [None, {"name": "workers", "template": ["x"]}]}},
       {"spec": {"replicatedJobs": {"name": "workers"}}},
       {"spec": {"workerGroupSpecs": "x"}}, {"spec": {"workerGroupSpecs": [None, 3]}},
       {"spec": {"pytorchReplicaSpecs": {"Worker": []}}}, {"spec": {"minMember": True}}]


@pytest.mark.parametrize("source", sorted(OWNERS))
@pytest.mark.parametrize("owner", ODD)
def test_size_functions_answer_for_odd_owner_shapes(source: str, owner: dict[str, Any]) -> None:
    _answers(source, owner)


@pytest.mark.parametrize("source", sorted(OWNERS))
@given(owner=st.dictionaries(st.just("spec"), _JSON))
def test_size_functions_answer_for_any_owner_shape(source: str, owner: dict[str, Any]) -> None:
    _answers(source, owner)


@pytest.mark.parametrize("node_selector", [None, {"gpu": "h100"}])
def test_ungate_patch_lifts_only_our_gate_and_pins_the_domain(
        node_selector: dict[str, str] | None) -> None:
    spec: dict[str, Any] = {"schedulingGates": [{"name": "other/gate"}, {"name": GATE}]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}},
           "spec": spec}
    record = Record("clique-3", CLIQUE, ("p",), 0.0)
    out = jsonpatch.apply_patch(pod, ungate_patch(PodInfo.parse(pod), record))
    assert out["spec"]["schedulingGates"] == [{"name": "other/gate"}]
    assert out["spec"]["nodeSelector"] == {**(node_selector or {}),
                                           CLIQUE: "clique-3"}


def test_ungate_patch_refuses_when_the_gates_moved() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}},
           "spec": {"schedulingGates": [{"name": GATE}]}}
    patch = ungate_patch(PodInfo.parse(pod), Record(None, None, ("p",), 0.0))
    moved = {**pod, "spec": {"schedulingGates": [{"name": "other/gate"}]}}
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(moved, patch)


@pytest.mark.parametrize("annotations", [None, {"gpu-airlock.io/rule": "kubeflow"}])
def test_record_and_anchor_ungate_are_one_patch(annotations: dict[str, str] | None) -> None:
    from webhook.controller.shells.patches import record_patch
    from webhook.keys import PLACEMENT_ANNOTATION
    meta: dict[str, Any] = {"name": "p", "namespace": "ml", "labels": {GANG_LABEL: "g"}}
    if annotations:
        meta["annotations"] = dict(annotations)
    pod = {"metadata": meta, "spec": {"schedulingGates": [{"name": GATE}]}}
    record = Record("clique-1", CLIQUE, ("p", "q"), 5.0)
    info = PodInfo.parse(pod)
    out = jsonpatch.apply_patch(pod, record_patch(info, record, SEAL)
                                + ungate_patch(info, record))
    assert PLACEMENT_ANNOTATION in out["metadata"]["annotations"]
    assert PodInfo.parse(out, SEAL).recorded.placement == record
    assert out["metadata"]["annotations"].items() >= (annotations or {}).items()
    assert out["spec"]["schedulingGates"] == []


@pytest.mark.parametrize(("api_version", "kind", "plural"), [
    ("kubeflow.org/v1", "PyTorchJob", "pytorchjobs"),
    ("kubeflow.org/v1", "MPIJob", "mpijobs"),        # the training-operator's MPIJob
    ("kubeflow.org/v2beta1", "MPIJob", "mpijobs"),   # the mpi-operator's
])
def test_a_kubeflow_owner_is_read_at_the_version_its_reference_names(
        api_version: str, kind: str, plural: str) -> None:
    _, found, _ = owner_of(pod().label("training.kubeflow.org/job-name", "j")
                           .owner(kind, "j", api_version))
    assert found == OwnerAddress("kubeflow.org", api_version.split("/")[1], plural, "j")


GPU_TEMPLATE = {"spec": {"containers": [{"name": "w", "resources": {
    "limits": {"nvidia.com/gpu": "8"}}}]}}
CPU_TEMPLATE = {"spec": {"containers": [{"name": "head", "resources": {
    "requests": {"cpu": "4"}}}]}}
CLASSED_CPU_TEMPLATE = {"metadata": {"labels": {CLASS_LABEL: "training"}},
                        "spec": CPU_TEMPLATE["spec"]}


@pytest.mark.parametrize(("builder", "owner", "size"), [
    # A CPU-only Ray head is not gated: the gang is the GPU workers.
    (pod().label("ray.io/cluster", "rc"),
     {"spec": {"headGroupSpec": {"template": CPU_TEMPLATE},
               "workerGroupSpecs": [{"replicas": 3, "template": GPU_TEMPLATE}]}}, 3),
    (pod().label("ray.io/cluster", "rc"),
     {"spec": {"headGroupSpec": {"template": GPU_TEMPLATE},
               "workerGroupSpecs": [{"replicas": 3, "template": GPU_TEMPLATE},
                                    {"replicas": 2, "template": CPU_TEMPLATE}]}}, 4),
    # An explicit class puts a CPU member in scope: it is gated, so it counts.
    (pod().label("ray.io/cluster", "rc"),
     {"spec": {"headGroupSpec": {"template": CLASSED_CPU_TEMPLATE},
               "workerGroupSpecs": [{"replicas": 3, "template": GPU_TEMPLATE}]}}, 4),
    # An MPI launcher without GPUs starts at once; the workers are the gang.
    (pod().label("training.kubeflow.org/job-name", "mpi").owner("MPIJob", "mpi",
                                                                 "kubeflow.org/v1"),
     {"spec": {"mpiReplicaSpecs": {"Launcher": {"template": CPU_TEMPLATE},
                                   "Worker": {"replicas": 4, "template": GPU_TEMPLATE}}}}, 4),
])
def test_members_without_accelerators_are_not_counted(builder: PodBuilder,
                                                      owner: dict[str, Any],
                                                      size: int) -> None:
    convention, _, info = owner_of(builder)
    assert convention.size(owner, info.labels, make_policy().counted().joins) == size


@pytest.mark.parametrize("template", [GPU_TEMPLATE, CPU_TEMPLATE, CLASSED_CPU_TEMPLATE,
                                      {"spec": {"initContainers": GPU_TEMPLATE["spec"][
                                          "containers"], "containers": []}},
                                      {"spec": {"containers": [{"name": "x"}]}}])
def test_a_template_joins_exactly_when_its_pods_are_classified(
        template: dict[str, Any]) -> None:
    """Accelerators.joins and classification's scope must agree, or a gang waits for
    members the webhook never gates."""
    policy = make_policy()
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": "p", "namespace": "ml", **template.get("metadata", {})},
           "spec": template["spec"]}
    in_scope = classify(PodView.parse(obj), policy).in_scope
    assert policy.counted().joins(template) is in_scope


@pytest.mark.parametrize(("group", "problem"), [
    ({"priorityClassName": "airlock-training", "priority": 50000}, None),
    ({}, "the PodGroup's priority is 0 (priorityClassName none) and its pods' 50000"),
    ({"priorityClassName": "batch", "priority": 10},
     "the PodGroup's priority is 10 (priorityClassName batch) and its pods' 50000"),
])
def test_a_kubernetes_podgroup_must_have_its_pods_priority(group: dict[str, Any],
                                                           problem: str | None) -> None:
    convention, _, _ = owner_of(pod().set("schedulingGroup", {"podGroupName": "pg"}))
    assert isinstance(convention, SamePriority)
    found = convention.priority_problem({"spec": group}, 50000)
    if problem is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(problem)
