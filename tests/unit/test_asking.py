"""What a pod asks beyond its class (an elastic gang's minimum, its run time, its gang's
topology, slices; Kueue's pod-set annotations), as the webhook records it under its own
keys, denies it when Airlock's keys are wrong, and warns when it ignores it."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import CLIQUE, PodBuilder, make_policy, pod
from webhook.admission.mutating import mutate
from webhook.admission.validating import validate_create
from webhook.keys import (
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_MIN_SIZE_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
    SLICE_KEY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
    airlocks_own,
)
from webhook.operators.jobset import keys as jobset
from webhook.operators.kubernetes.keys import COMPLETION_INDEX, JOB_NAME_LABEL
from webhook.operators.kueue import keys as kueue
from webhook.operators.leaderworkerset import keys as lws
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.model import Policy

HOST = "kubernetes.io/hostname"
BLOCK = "cloud.google.com/gce-topology-block"
# Three levels, so a slice level and a gang level differ from the class's (nvlink).
POLICY = make_policy(topology_levels={"nvlink": CLIQUE, "block": BLOCK, "host": HOST})
# Airlock's keys the webhook writes for the controller from what a pod asks.
WRITTEN = (GANG_EXPECTED_MIN_ANNOTATION, RUNTIME_SECONDS_ANNOTATION, TOPOLOGY_KEY_ANNOTATION,
           TOPOLOGY_MODE_ANNOTATION, SLICE_KEY_ANNOTATION, SLICE_EXPECTED_SIZE_ANNOTATION,
           SLICE_INDEX_ANNOTATION)


def gang(size: int = 8) -> PodBuilder:
    return pod().gpus(8).gang("g", size)


def indexed_job(index: int) -> PodBuilder:
    return pod().gpus(8).owner("Job", "ddp").label(JOB_NAME_LABEL, "ddp").annotation(
        COMPLETION_INDEX, str(index)).label(COMPLETION_INDEX, str(index))


def lws_pod(worker: int) -> PodBuilder:
    return pod().gpus(8).label(lws.NAME_LABEL, "llm").label(lws.GROUP_INDEX_LABEL, "3") \
        .label(lws.WORKER_INDEX, str(worker)).annotation(lws.SIZE_ANNOTATION, "8")


def mutated(builder: PodBuilder, policy: Policy = POLICY) -> dict[str, Any]:
    obj = builder.build()
    view = PodView.parse(obj)
    patch = mutate(view, classify(view, policy), policy, "CREATE").patch
    out: dict[str, Any] = jsonpatch.apply_patch(obj, list(patch))
    again = PodView.parse(out)
    assert mutate(again, classify(again, policy), policy, "CREATE").patch == [], \
        "mutation is not idempotent"
    return out


def written(builder: PodBuilder) -> dict[str, str]:
    annotations = mutated(builder)["metadata"].get("annotations", {})
    return {k.removeprefix("gpu-airlock.io/"): annotations[k] for k in WRITTEN
            if k in annotations}


def verdict(builder: PodBuilder) -> tuple[str | None, tuple[str, ...]]:
    view = PodView.parse(builder.build())
    v = validate_create(view, classify(view, POLICY), POLICY)
    return v.denial, v.warnings


def test_what_the_webhook_writes_is_airlocks_own() -> None:
    """So the webhook strips it from a pod that came with it, and the apiserver refuses
    anyone else's change to it."""
    assert all(airlocks_own(key) for key in WRITTEN)


# name: (the pod, what the webhook writes for the controller, without the key's prefix)
RECORDED: dict[str, tuple[PodBuilder, dict[str, str]]] = {
    "a gang with its class's topology": (gang(), {
        "topology-key": CLIQUE, "topology-mode": "required"}),
    "an elastic gang": (gang().annotation(GANG_MIN_SIZE_ANNOTATION, "4"), {
        "gang-expected-min-size": "4", "topology-key": CLIQUE, "topology-mode": "required"}),
    "a minimum as big as the gang": (gang().annotation(GANG_MIN_SIZE_ANNOTATION, "8"), {
        "gang-expected-min-size": "8", "topology-key": CLIQUE, "topology-mode": "required"}),
    "a run time": (gang().annotation(EXPECTED_RUNTIME_ANNOTATION, "1h30m"), {
        "expected-runtime-seconds": "5400", "topology-key": CLIQUE,
        "topology-mode": "required"}),
    "the pod's deadline, when shorter": (
        gang().annotation(EXPECTED_RUNTIME_ANNOTATION, "2h").set("activeDeadlineSeconds", 600),
        {"expected-runtime-seconds": "600", "topology-key": CLIQUE,
         "topology-mode": "required"}),
    "the run time, when shorter than the deadline": (
        gang().annotation(EXPECTED_RUNTIME_ANNOTATION, "5m").set("activeDeadlineSeconds", 600),
        {"expected-runtime-seconds": "300", "topology-key": CLIQUE,
         "topology-mode": "required"}),
    "a queued single pod's run time": (
        pod().gpus(1).owner("Job", "sweep").annotation(EXPECTED_RUNTIME_ANNOTATION, "600"),
        {"expected-runtime-seconds": "600"}),
    "a queued single pod's deadline": (
        pod().gpus(1).owner("Job", "sweep").set("activeDeadlineSeconds", 120),
        {"expected-runtime-seconds": "120"}),
    "no run time on a pod that is not gated": (
        pod().gpus(1).owner("ReplicaSet", "web-1", "apps/v1")
        .annotation(EXPECTED_RUNTIME_ANNOTATION, "600"), {}),
    "a required level instead of the class's": (
        gang().annotation(REQUIRED_TOPOLOGY_ANNOTATION, "block"), {
            "topology-key": BLOCK, "topology-mode": "required"}),
    "a preferred level instead of the class's": (
        gang().annotation(PREFERRED_TOPOLOGY_ANNOTATION, "block"), {
            "topology-key": BLOCK, "topology-mode": "preferred"}),
    "slices of a gang its operator does not number": (
        gang().annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "4"), {
            "topology-key": CLIQUE, "topology-mode": "required", "slice-topology-key": HOST,
            "slice-expected-size": "4"}),
    "slices of an Indexed Job: completion index 5 in slices of 4": (
        indexed_job(5).annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "4"), {
            "topology-key": CLIQUE, "topology-mode": "required", "slice-topology-key": HOST,
            "slice-expected-size": "4", "slice-index": "1"}),
    "slices of a LeaderWorkerSet group, by worker index": (
        lws_pod(2).annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "2"), {
            "slice-topology-key": HOST, "slice-expected-size": "2", "slice-index": "1"}),
    # A pod's number in a JobSet's gang needs its Job's parallelism, which it does not carry.
    "slices of a JobSet's replicated job, unnumbered": (
        pod().gpus(8).label(jobset.JOBSET_LABEL, "js").label(jobset.REPLICATED_JOB_LABEL, "w")
        .label(jobset.JOB_INDEX, "1").label(COMPLETION_INDEX, "1")
        .annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "2"), {
            "topology-key": CLIQUE, "topology-mode": "required", "slice-topology-key": HOST,
            "slice-expected-size": "2"}),
    "a short last slice: 7 of a gang of 8 in slices of 3": (
        indexed_job(7).annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "3"), {
            "topology-key": CLIQUE, "topology-mode": "required", "slice-topology-key": HOST,
            "slice-expected-size": "3", "slice-index": "2"}),
    "Kueue's pod-set annotations, by node label": (
        indexed_job(3).annotation(kueue.PREFERRED_TOPOLOGY, BLOCK)
        .annotation(kueue.SLICE_REQUIRED_TOPOLOGY, HOST).annotation(kueue.SLICE_SIZE, "2"), {
            "topology-key": BLOCK, "topology-mode": "preferred", "slice-topology-key": HOST,
            "slice-expected-size": "2", "slice-index": "1"}),
    "Airlock's keys win over Kueue's": (
        indexed_job(3).annotation(kueue.REQUIRED_TOPOLOGY, HOST)
        .annotation(REQUIRED_TOPOLOGY_ANNOTATION, "block")
        .annotation(kueue.SLICE_REQUIRED_TOPOLOGY, BLOCK).annotation(kueue.SLICE_SIZE, "2")
        .annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "4"), {
            "topology-key": BLOCK, "topology-mode": "required", "slice-topology-key": HOST,
            "slice-expected-size": "4", "slice-index": "0"}),
    "a Kueue label that is no level is ignored": (
        gang().annotation(kueue.REQUIRED_TOPOLOGY, "example.com/rack"), {
            "topology-key": CLIQUE, "topology-mode": "required"}),
    "a gang's asks on a pod in no gang are ignored": (
        pod().gpus(1).owner("Job", "sweep").annotation(GANG_MIN_SIZE_ANNOTATION, "2")
        .annotation(REQUIRED_TOPOLOGY_ANNOTATION, "host"), {}),
    "Airlock's own keys a pod came with are not its own": (
        pod().gpus(1).owner("Job", "sweep").annotation(SLICE_INDEX_ANNOTATION, "3")
        .annotation(GANG_EXPECTED_MIN_ANNOTATION, "1")
        .annotation(RUNTIME_SECONDS_ANNOTATION, "1").label(SLICE_KEY_ANNOTATION, "x"), {}),
}


@pytest.mark.parametrize("name", RECORDED)
def test_what_the_webhook_records_of_what_a_pod_asks(name: str) -> None:
    builder, recorded = RECORDED[name]
    assert written(builder) == recorded


@pytest.mark.parametrize(("builder", "mode"), [
    (gang().annotation(REQUIRED_TOPOLOGY_ANNOTATION, "block"), "required"),
    (gang().annotation(PREFERRED_TOPOLOGY_ANNOTATION, "block"), "preferred"),
])
def test_an_asked_level_places_the_gang_as_a_class_level_does(builder: PodBuilder,
                                                               mode: str) -> None:
    affinity = mutated(builder)["spec"]["affinity"]
    if mode == "required":
        terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert terms["nodeSelectorTerms"] == [{"matchExpressions": [
            {"key": BLOCK, "operator": "Exists"}]}]
    else:
        assert "nodeAffinity" not in affinity
        term = affinity["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
        assert term["podAffinityTerm"]["topologyKey"] == BLOCK


# name: (the pod, what the denial says)
DENIED: dict[str, tuple[PodBuilder, str]] = {
    "a minimum that is no number": (
        gang().annotation(GANG_MIN_SIZE_ANNOTATION, "half"),
        f"{GANG_MIN_SIZE_ANNOTATION}='half' is not a whole number from 1 to 100000"),
    "a minimum of 0": (gang().annotation(GANG_MIN_SIZE_ANNOTATION, "0"),
                       "is not a whole number from 1 to 100000"),
    "a minimum of 400 digits": (
        gang().annotation(GANG_MIN_SIZE_ANNOTATION, "9" * 400),
        f"{GANG_MIN_SIZE_ANNOTATION}='999999999999999999999999'... (400 characters) is not "
        f"a whole number from 1 to 100000"),
    "a minimum above the gang's size": (
        gang(4).annotation(GANG_MIN_SIZE_ANNOTATION, "5"),
        f"{GANG_MIN_SIZE_ANNOTATION}='5' is more than the gang's size 4; the fewest pods the "
        f"gang can start with, 1 to 4"),
    "a run time that is no duration": (
        gang().annotation(EXPECTED_RUNTIME_ANNOTATION, "a while"),
        f"{EXPECTED_RUNTIME_ANNOTATION}='a while' is not a run time from 1s to 31622400s; "
        f"write whole seconds (3600) or a duration"),
    "a run time of 400 digits": (
        gang().annotation(EXPECTED_RUNTIME_ANNOTATION, "1" * 400), "(400 characters) is not "
                                                                  "a run time"),
    "a run time of nothing, on a single pod": (
        pod().gpus(1).owner("Job", "j").annotation(EXPECTED_RUNTIME_ANNOTATION, "0s"),
        "is not a run time from 1s"),
    "a level the policy does not have": (
        gang().annotation(REQUIRED_TOPOLOGY_ANNOTATION, "rack"),
        f"{REQUIRED_TOPOLOGY_ANNOTATION}='rack' is not a topology level of the policy; its "
        f"levels: nvlink, block, host"),
    "a node label where a level's name goes": (
        gang().annotation(PREFERRED_TOPOLOGY_ANNOTATION, HOST), "is not a topology level"),
    "both a required and a preferred level": (
        gang().annotation(REQUIRED_TOPOLOGY_ANNOTATION, "block")
        .annotation(PREFERRED_TOPOLOGY_ANNOTATION, "host"), "not both"),
    "a slice size without a slice level": (
        gang().annotation(SLICE_SIZE_ANNOTATION, "2"),
        f"set both {SLICE_REQUIRED_TOPOLOGY_ANNOTATION}"),
    "a slice level without a slice size": (
        gang().annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host"),
        f"and {SLICE_SIZE_ANNOTATION} (the pods in a slice), or neither"),
    "a slice level the policy does not have": (
        gang().annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "rack")
        .annotation(SLICE_SIZE_ANNOTATION, "2"), f"{SLICE_REQUIRED_TOPOLOGY_ANNOTATION}='rack'"),
    "a slice size that is no number": (
        gang().annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "-1"),
        f"{SLICE_SIZE_ANNOTATION}='-1' is not a whole number from 1 to 100000"),
    "a slice bigger than the gang": (
        gang(4).annotation(SLICE_REQUIRED_TOPOLOGY_ANNOTATION, "host")
        .annotation(SLICE_SIZE_ANNOTATION, "8"), "is more than the gang's size 4"),
}


@pytest.mark.parametrize("name", DENIED)
def test_airlocks_keys_with_values_it_cannot_follow_are_denied(name: str) -> None:
    builder, message = DENIED[name]
    denial, _ = verdict(builder)
    assert denial is not None
    assert message in denial


# name: (the pod, what a warning says)
WARNED: dict[str, tuple[PodBuilder, str]] = {
    "a Kueue label that is no level": (
        gang().annotation(kueue.REQUIRED_TOPOLOGY, "example.com/rack"),
        f"{kueue.REQUIRED_TOPOLOGY}='example.com/rack' is ignored: no topology level of the "
        f"Airlock policy has that node label"),
    "a Kueue slice level without its size": (
        gang().annotation(kueue.SLICE_REQUIRED_TOPOLOGY, HOST),
        f"{kueue.SLICE_REQUIRED_TOPOLOGY} is ignored without a slice size"),
    "a gang's asks on a pod in no gang": (
        pod().gpus(1).owner("Job", "j").annotation(GANG_MIN_SIZE_ANNOTATION, "2"),
        f"{GANG_MIN_SIZE_ANNOTATION} ignored: the pod is in no gang"),
}


@pytest.mark.parametrize("name", WARNED)
def test_what_airlock_cannot_follow_but_is_not_its_users_is_warned(name: str) -> None:
    builder, message = WARNED[name]
    denial, warnings = verdict(builder)
    assert denial is None
    assert any(message in w for w in warnings), warnings


@pytest.mark.parametrize("builder", [b for b, _ in RECORDED.values()])
def test_what_is_recorded_is_allowed(builder: PodBuilder) -> None:
    assert verdict(builder)[0] is None
