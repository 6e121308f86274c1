"""Fractional GPUs: the policy's offers (`spec.gpuSlices`), the webhook mapping a pod's
gpu-memory / gpu-fraction ask to the smallest slice its class may use, the denials for
bad asks, and the controller counting slices as their share of a GPU."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import jsonpatch
import pytest

from tests.builders import (
    MIXED,
    NOW,
    PodBuilder,
    admitted,
    gang,
    make_policy,
    member,
    node,
    pod,
    policy_yaml,
    snapshot,
    told,
    tracked,
    waits,
)
from tests.paths import BASE_POLICY, POLICIES, POLICY_EXAMPLES
from webhook.accelerators import Accelerators
from webhook.admission.explaining import explain_pod
from webhook.admission.mutating import mutate
from webhook.controller.core.deciding import decide
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CLASS_LABEL,
    GPU_FRACTION_ANNOTATION,
    GPU_MEMORY_ANNOTATION,
)
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.linting import run_lint
from webhook.policy.loading import PolicyError, load_policy, policy_files
from webhook.policy.model import Policy
from webhook.policy.slices import MigProfile, SharedGpu
from webhook.sandbox.nodes import Shape, mig_profiles, topology

MIG_1G, MIG_2G, MIG_3G = "nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", \
    "nvidia.com/mig-3g.40gb"
SHARED = "nvidia.com/gpu.shared"
MIG_TAINT = {"key": "example.com/mig", "operator": "Exists", "effect": "NoSchedule"}

OFFERS = make_policy(slices=(
    MigProfile.model_validate({"resource": MIG_1G, "memory": "10Gi", "share": "1/7",
                               "classes": ["inference", "scavenger"],
                               "nodeSelector": MIXED, "tolerations": [MIG_TAINT]}),
    MigProfile.model_validate({"resource": MIG_2G, "memory": "20Gi", "share": "2/7",
                               "nodeSelector": MIXED}),
    MigProfile.model_validate({"resource": MIG_3G, "memory": "40Gi", "share": "3/7",
                               "nodeSelector": MIXED}),
    SharedGpu.model_validate({"resource": SHARED, "memory": "20Gi", "replicas": 4,
                              "classes": ["inference"]}),
))


def asking(key: str, value: str, cls: str = "inference", gpus: int | str = 1) -> PodBuilder:
    return pod("nb").gpus(gpus).label(CLASS_LABEL, cls).annotation(key, value)


def memory(value: str, cls: str = "inference", gpus: int | str = 1) -> PodBuilder:
    return asking(GPU_MEMORY_ANNOTATION, value, cls, gpus)


def fraction(value: str, cls: str = "inference") -> PodBuilder:
    return asking(GPU_FRACTION_ANNOTATION, value, cls)


def mutated(obj: dict[str, Any], policy: Policy = OFFERS) -> tuple[list[Any], dict[str, Any]]:
    view = PodView.parse(obj)
    patch = list(mutate(view, classify(view, policy), policy, "CREATE").patch)
    return patch, jsonpatch.apply_patch(obj, patch)


def limits(obj: dict[str, Any], field: str = "containers") -> dict[str, str]:
    out: dict[str, str] = obj["spec"][field][0]["resources"]["limits"]
    return out


# --- the mapping --------------------------------------------------------------------------

MAPPINGS: list[tuple[str, PodBuilder, str]] = [
    ("10Gi is the smallest MIG slice", memory("10Gi"), MIG_1G),
    ("less memory, the same slice", memory("512Mi"), MIG_1G),
    ("a byte more takes the next size", memory("10737418241"), MIG_2G),
    ("a fraction as a decimal", fraction("0.1"), MIG_1G),
    ("a fraction as a ratio", fraction("1/7"), MIG_1G),
    ("a quarter: one of four shared replicas is smaller than 2/7", fraction("0.25"), SHARED),
    ("the same memory: MIG before sharing, for isolation", memory("20Gi"), MIG_2G),
    ("a class may use only its slices", memory("10Gi", cls="training"), MIG_2G),
    ("nor shared ones", fraction("0.25", cls="scavenger"), MIG_2G),
    ("up to the largest", memory("40Gi", cls="training"), MIG_3G),
]


@pytest.mark.parametrize(("builder", "resource"), [m[1:] for m in MAPPINGS],
                         ids=[m[0] for m in MAPPINGS])
def test_the_smallest_slice_the_class_may_use_replaces_the_whole_gpu(
        builder: PodBuilder, resource: str) -> None:
    obj = builder.cpu().build()
    _, after = mutated(obj)
    requests = after["spec"]["containers"][0]["resources"]["requests"]
    assert limits(after) == {resource: "1"}
    assert requests == {"cpu": "4", "memory": "16Gi", resource: "1"}
    assert after["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == resource
    view = PodView.parse(after)
    assert explain_pod(after, OFFERS, {})["allowed"], "validation accepts the mapped pod"
    assert resource in view.resources


def test_the_offer_adds_what_scheduling_needs_and_says_what_it_did() -> None:
    obj = memory("10Gi").set("nodeSelector", {"pool": "a"}).build()
    view = PodView.parse(obj)
    mutation = mutate(view, classify(view, OFFERS), OFFERS, "CREATE")
    after = jsonpatch.apply_patch(obj, list(mutation.patch))
    assert after["spec"]["nodeSelector"] == {"pool": "a", **MIXED}
    assert MIG_TAINT in after["spec"]["tolerations"]
    assert mutation.warnings == (
        f"{GPU_MEMORY_ANNOTATION} 10Gi: {MIG_1G} (1/7 GPU) for container main, not a whole GPU",)


def test_every_container_with_one_gpu_gets_a_slice_others_are_left_alone() -> None:
    b = memory("10Gi")
    b.spec["initContainers"] = [{"name": "warm", "image": "x", "resources": {
        "limits": {"nvidia.com/gpu": "1"}}}]
    b.spec["containers"].append({"name": "sidecar", "image": "y"})
    _, after = mutated(b.build())
    assert limits(after, "initContainers") == {MIG_1G: "1"}
    assert limits(after) == {MIG_1G: "1"}
    assert "resources" not in after["spec"]["containers"][1]


IDEMPOTENT = {
    "mapped": memory("10Gi"),
    "shared": fraction("0.25"),
    "nothing fits": memory("500Gi"),
    "bad value": memory("lots"),
}


@pytest.mark.parametrize("name", IDEMPOTENT)
def test_mapping_is_idempotent(name: str) -> None:
    _, once = mutated(IDEMPOTENT[name].build())
    again, _ = mutated(once)
    assert again == []


NO_MAPPING: list[tuple[str, PodBuilder, Policy]] = [
    ("no annotation", pod().gpus(1).label(CLASS_LABEL, "inference"), OFFERS),
    ("nothing offered", memory("10Gi"), make_policy()),
    ("nothing fits", memory("500Gi"), OFFERS),
    ("not a quantity", memory("lots"), OFFERS),
    ("both annotations", memory("10Gi").annotation(GPU_FRACTION_ANNOTATION, "0.1"), OFFERS),
    ("more than one gpu", memory("10Gi", gpus=2), OFFERS),
]


@pytest.mark.parametrize(("builder", "policy"), [m[1:] for m in NO_MAPPING],
                         ids=[m[0] for m in NO_MAPPING])
def test_otherwise_the_pod_keeps_its_whole_gpu(builder: PodBuilder, policy: Policy) -> None:
    _, after = mutated(builder.build(), policy)
    assert "nvidia.com/gpu" in limits(after)
    assert "nodeSelector" not in after["spec"]


# --- bad asks are denied, naming the annotation ---------------------------------------------

DENIALS: list[tuple[str, PodBuilder, str]] = [
    ("not a quantity", memory("lots"),
     f"{GPU_MEMORY_ANNOTATION}='lots' is not a quantity from 1 to 1Pi (e.g. 10Gi)"),
    ("zero memory", memory("0"), f"{GPU_MEMORY_ANNOTATION}='0' is not a quantity from 1"),
    ("negative memory", memory("-1Gi"), f"{GPU_MEMORY_ANNOTATION}='-1Gi' is not a quantity"),
    ("memory of a tiny exponent", memory("1e-200000000"),
     f"{GPU_MEMORY_ANNOTATION}='1e-200000000' is not a quantity from 1"),
    ("not a number", fraction("half"),
     f"{GPU_FRACTION_ANNOTATION}='half' is not a number in (0, 1]"),
    ("zero fraction", fraction("0"), f"{GPU_FRACTION_ANNOTATION}='0' is not a number in (0, 1]"),
    ("more than a gpu", fraction("1.5"), f"{GPU_FRACTION_ANNOTATION}='1.5' is not a number"),
    ("a ratio over zero", fraction("1/0"), "is not a number in (0, 1]"),
    ("a fraction of a tiny exponent", fraction("1e-200000000"),
     f"{GPU_FRACTION_ANNOTATION}='1e-200000000' is not a number in (0, 1]"),
    ("both", memory("10Gi").annotation(GPU_FRACTION_ANNOTATION, "0.1"),
     f"set {GPU_MEMORY_ANNOTATION} or {GPU_FRACTION_ANNOTATION}, not both"),
    ("with two whole gpus", memory("10Gi", gpus=2),
     f"{GPU_MEMORY_ANNOTATION} asks for part of one GPU, but container main requests 2 "
     f"nvidia.com/gpu"),
    ("nothing fits", memory("500Gi", cls="training"),
     f"{GPU_MEMORY_ANNOTATION}: no GPU slice class training may use has 500Gi; the largest "
     f"is {MIG_3G} (40Gi, 3/7 of a GPU)"),
    ("no gpu to replace", pod().label(CLASS_LABEL, "inference").gpus(1, "amd.com/gpu")
     .annotation(GPU_FRACTION_ANNOTATION, "0.5"),
     f"{GPU_FRACTION_ANNOTATION}: no container requests nvidia.com/gpu"),
    ("unclassified", pod().gpus(1).annotation(GPU_MEMORY_ANNOTATION, "1Gi"),
     f"{GPU_MEMORY_ANNOTATION}: no policy rule classified this pod"),
]


@pytest.mark.parametrize(("builder", "message"), [d[1:] for d in DENIALS],
                         ids=[d[0] for d in DENIALS])
def test_bad_asks_are_denied_naming_the_annotation(builder: PodBuilder, message: str) -> None:
    result = explain_pod(builder.build(), OFFERS, {})
    assert not result["allowed"]
    assert message in result["reason"], result["reason"]


def test_a_class_offered_nothing_is_told_so() -> None:
    result = explain_pod(memory("1Gi", cls="training").build(), make_policy(), {})
    assert not result["allowed"]
    assert result["reason"] == (
        f"{GPU_MEMORY_ANNOTATION}: the policy offers no GPU slice to class training; ask for a "
        f"whole nvidia.com/gpu (remove the annotation) or see docs/fractional-gpus.md")


def test_a_pod_that_requests_a_slice_itself_passes() -> None:
    obj = pod().gpus(1, MIG_1G).label(CLASS_LABEL, "inference") \
        .annotation(GPU_MEMORY_ANNOTATION, "5Gi").build()
    assert explain_pod(obj, OFFERS, {})["allowed"]


# --- the offers in policy -------------------------------------------------------------------

def offer_doc(**fields: Any) -> str:
    offer = {"resource": MIG_1G, "memory": "10Gi", "share": "1/7", **fields}
    return policy_yaml("slices", {"gpuSlices": {"mig": [offer]}})


POLICY_ERRORS: list[tuple[str, str, str]] = [
    ("unknown class", offer_doc(classes=["vip"]),
     "30-slices.yaml:12: spec.gpuSlices.mig.0.classes.0: Input should be 'training', "
     "'inference' or 'scavenger'"),
    ("no class", offer_doc(classes=[]), "30-slices.yaml:11: spec.gpuSlices.mig.0.classes: "
     "Value error, no class may use this slice"),
    ("share over one", offer_doc(share="8/7"), "30-slices.yaml:10: spec.gpuSlices.mig.0.share: "
     "Value error, share 8/7 is not in (0, 1]"),
    ("share zero", offer_doc(share=0), "share 0 is not in (0, 1]"),
    ("share not a number", offer_doc(share="a seventh"), "'a seventh' is not a number or a "
     "fraction"),
    ("memory not a quantity", offer_doc(memory="ten gigs"), "30-slices.yaml:9: "
     "spec.gpuSlices.mig.0.memory: Value error, 'ten gigs' is not a quantity"),
    ("memory zero", offer_doc(memory=0), "memory 0 must be more than zero"),
    ("the whole gpu", offer_doc(resource="nvidia.com/gpu"), "nvidia.com/gpu is the whole GPU "
     "slices replace"),
    ("not an extended resource", offer_doc(resource="memory"), "'memory' is not an extended "
     "resource"),
    ("unknown field", offer_doc(profile="1g"), "spec.gpuSlices.mig.0.profile: unknown field"),
    ("offered twice", policy_yaml("slices", {"gpuSlices": {
        "mig": [{"resource": MIG_1G, "memory": "10Gi", "share": "1/7"}],
        "shared": [{"resource": MIG_1G, "memory": "10Gi", "replicas": 7}]}}),
     f"30-slices.yaml:12: GPU slice '{MIG_1G}' is already defined at "),
    ("replicas zero", policy_yaml("slices", {"gpuSlices": {"shared": [
        {"resource": SHARED, "memory": "10Gi", "replicas": 0}]}}),
     "spec.gpuSlices.shared.0.replicas: Input should be greater than or equal to 1"),
]


@pytest.mark.parametrize(("text", "message"), [e[1:] for e in POLICY_ERRORS],
                         ids=[e[0] for e in POLICY_ERRORS])
def test_offers_are_checked_with_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    (tmp_path / "30-slices.yaml").write_text(text)
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path)
    assert message in str(caught.value), str(caught.value)


def test_offered_slices_are_accelerators_with_their_share(tmp_path: Path) -> None:
    (tmp_path / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    (tmp_path / "30-slices.yaml").write_text(offer_doc())
    policy = load_policy(tmp_path)
    assert MIG_1G in policy.accelerators
    assert policy.shares == {MIG_1G: Fraction(1, 7)}
    assert OFFERS.shares[SHARED] == Fraction(1, 4)


def test_the_default_policy_offers_nothing() -> None:
    assert load_policy(POLICIES).slices == ()


# --- counting -------------------------------------------------------------------------------

COUNTS: list[tuple[str, dict[str, int], Fraction | int]] = [
    ("seven 1g slices are one GPU", {MIG_1G: 7}, 1),
    ("slices of several sizes add up", {MIG_1G: 1, MIG_3G: 2}, Fraction(1)),
    ("with whole GPUs", {"nvidia.com/gpu": 2, MIG_2G: 1, "cpu": 8000}, 2 + Fraction(2, 7)),
    ("shared replicas", {SHARED: 2}, Fraction(1, 2)),
    ("overcommitted", {MIG_1G: -7}, -1),
]


@pytest.mark.parametrize(("resources", "want"), [c[1:] for c in COUNTS],
                         ids=[c[0] for c in COUNTS])
def test_slices_count_their_share_of_a_gpu(resources: dict[str, int],
                                           want: Fraction | int) -> None:
    counted = Accelerators.of(OFFERS.accelerators, OFFERS.shares)
    assert counted.count(resources) == want


def test_whole_gpus_count_as_ints() -> None:
    counted = Accelerators.of(["nvidia.com/gpu"], {MIG_1G: Fraction(1, 7)})
    assert type(counted.count({"nvidia.com/gpu": 3})) is int
    whole_slice = Accelerators.of([], {"x.com/gpu": Fraction(1)})
    assert whole_slice.shares == {}
    assert whole_slice.count({"x.com/gpu": 2}) == 2


def test_the_snapshot_counts_free_slices_and_checks_each_resource() -> None:
    counted = Accelerators.of(OFFERS.accelerators, OFFERS.shares)
    mig = node("mig-0", None, gpus=14, resource=MIG_1G)
    snap = snapshot([mig, node("gpu-0", None)], accelerators=counted)
    assert snap.free_gpu == {"mig-0": 2, "gpu-0": 8}
    notebook = member("sweep", 0, gpus=1, size=2, resource=MIG_1G)
    assert snap.eligible_nodes(notebook) == ["mig-0"]
    snap.take("mig-0", notebook.requests)
    assert snap.free_gpu["mig-0"] == Fraction(13, 7)
    assert snap.need([notebook, notebook]) == Fraction(2, 7)


# --- the shipped examples -------------------------------------------------------------------

def test_mig_example_lints_maps_10gi_and_denies_500gi(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert run_lint(POLICY_EXAMPLES / "mig") == 0, capsys.readouterr().out
    policy = load_policy(POLICY_EXAMPLES / "mig")
    notebook = pod("nb").gpus(1).label("notebook-name", "alice")
    small = explain_pod(notebook.annotation(GPU_MEMORY_ANNOTATION, "10Gi").build(), policy, {})
    assert small["allowed"]
    assert small["class"] == "inference"
    assert limits(small["mutated"]) == {MIG_1G: "1"}
    assert small["mutated"]["spec"]["nodeSelector"] == MIXED
    big = explain_pod(notebook.annotation(GPU_MEMORY_ANNOTATION, "500Gi").build(), policy, {})
    assert not big["allowed"]
    assert "the largest is nvidia.com/mig-7g.80gb (80Gi, 1 of a GPU)" in big["reason"]
    assert Accelerators.of(policy.accelerators, policy.shares).count(
        {MIG_1G: 7, MIG_3G: 2, "nvidia.com/mig-7g.80gb": 1}) == 1 + Fraction(6, 7) + 1


def test_time_slicing_example_adds_to_the_defaults(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for f in [*policy_files(POLICIES), *policy_files(POLICY_EXAMPLES / "time-slicing")]:
        (tmp_path / f.name).write_bytes(f.read_bytes())
    assert run_lint(tmp_path) == 0, capsys.readouterr().out
    policy = load_policy(tmp_path)
    serving = pod("llm").gpus(1).image("vllm/vllm-openai:v0.6.3") \
        .annotation(GPU_FRACTION_ANNOTATION, "0.25").build()
    result = explain_pod(serving, policy, {})
    assert result["allowed"]
    assert limits(result["mutated"]) == {SHARED: "1"}
    half = explain_pod(pod("llm").gpus(1).image("vllm/vllm-openai:v0.6.3")
                       .annotation(GPU_FRACTION_ANNOTATION, "0.5").build(), policy, {})
    assert not half["allowed"]
    assert f"the largest is {SHARED} (20Gi, 1/4 of a GPU)" in half["reason"]


def test_a_gang_of_slices_is_admitted_and_told_in_gpu_equivalents() -> None:
    counted = Accelerators.of(OFFERS.accelerators, OFFERS.shares)
    nodes = [node("mig-0", "d0", gpus=7, resource=MIG_1G), node("gpu-0", "d1")]
    fits = decide(tracked(nodes, gang("g", 7, gpus=1, resource=MIG_1G), accelerators=counted),
                  {}, NOW)
    assert admitted(fits) == {"g": "d0"}
    assert told(fits[0]) == "Admitted: domain d0; 7 pods, 1 GPUs"
    too_big = decide(tracked(nodes, gang("h", 8, gpus=1, resource=MIG_1G), accelerators=counted),
                     {}, NOW)
    assert waits(too_big) == {"h": "Waiting: 8/8 pods present; needs 8/7 GPUs in one "
                                    "nvidia.com/gpu.clique domain, more than the largest has "
                                    "(1); it cannot fit until the cluster grows"}


# --- the sandbox's MIG nodes ----------------------------------------------------------------

@pytest.mark.parametrize(("text", "want"), [
    ("1g.10gb=7", (("1g.10gb", 7),)),
    ("3g.40gb=2, 1g.10gb=1", (("3g.40gb", 2), ("1g.10gb", 1))),
])
def test_mig_option_reads_profile_counts(text: str, want: tuple[tuple[str, int], ...]) -> None:
    assert mig_profiles(text) == want


@pytest.mark.parametrize("text", ["1g.10gb", "1g.10gb=0", "10gb=7", "8g.90gb=1", "1g.10gb=x"])
def test_mig_option_rejects_what_is_not_profile_count(text: str) -> None:
    with pytest.raises(ValueError, match="is not PROFILE=COUNT"):
        mig_profiles(text)


def test_mig_nodes_advertise_slices_and_the_mixed_strategy() -> None:
    nodes = topology(Shape(nodes=1, mig=mig_profiles("1g.10gb=7,3g.40gb=2"), mig_nodes=2))
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-0000", "mig-0000", "mig-0001"]
    mig = nodes[1]
    assert {k: v for k, v in mig["status"]["allocatable"].items() if "nvidia" in k} == {
        "nvidia.com/gpu": "0", MIG_1G: "7", MIG_3G: "2"}
    labels = mig["metadata"]["labels"]
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig-1g.10gb.count"] == "7"
    assert labels["nvidia.com/gpu.count"] == "2", "13 compute slices need two GPUs"
    assert topology(Shape(nodes=1, mig_nodes=2))[-1]["metadata"]["name"] == "gpu-0000"
