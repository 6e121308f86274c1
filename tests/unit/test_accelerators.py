"""One answer to "which resources are accelerators, and how many GPUs is that": the shared
module, the policy's check of its names, the apiserver pre-filter's text, what the
webhook records on a pod and what the controller counts from it."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml

from tests.builders import (
    NEURON,
    NOW,
    POLICY_DEFAULT,
    admitted,
    cluster,
    gang,
    pod,
    policy_yaml,
    snapshot,
    tracked,
    waits,
)
from tests.paths import BASE_POLICY, POLICIES, ROOT
from webhook.accelerators import (
    MATCH_CONDITIONS,
    Accelerators,
    extended,
    name_problem,
    recorded,
    to_record,
)
from webhook.admission.mutating import mutate
from webhook.cli import main
from webhook.controller.core.deciding import decide
from webhook.keys import ACCELERATORS_ANNOTATION
from webhook.pods import PodView
from webhook.policy.classifying import classify
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy

MIG = "nvidia.com/mig-1g.10gb"

# --- counting ---------------------------------------------------------------------------

COUNTS: list[tuple[str, tuple[str, ...], dict[str, int], int]] = [
    ("whole GPUs", ("nvidia.com/gpu",), {"nvidia.com/gpu": 8, "cpu": 96_000}, 8),
    ("only the named resources", ("nvidia.com/gpu",), {"amd.com/gpu": 8, NEURON: 16}, 0),
    ("a non-gpu accelerator", ("nvidia.com/gpu", NEURON), {NEURON: 16, "memory": 2**40}, 16),
    ("a MIG slice is a device", (MIG,), {MIG: 7}, 7),
    ("several kinds add up", ("nvidia.com/gpu", "amd.com/gpu"),
     {"nvidia.com/gpu": 2, "amd.com/gpu": 3}, 5),
    ("a name merely containing gpu is not one", ("nvidia.com/gpu",),
     {"example.com/gpu-fan": 4}, 0),
    ("overcommitted free capacity counts below zero", ("nvidia.com/gpu",),
     {"nvidia.com/gpu": -2}, -2),
    ("nothing", (NEURON,), {}, 0),
]


@pytest.mark.parametrize(("names", "resources", "want"), [c[1:] for c in COUNTS],
                         ids=[c[0] for c in COUNTS])
def test_count_is_gpu_equivalents_of_the_named_resources(
        names: tuple[str, ...], resources: dict[str, int], want: int) -> None:
    assert Accelerators.of(names).count(resources) == want


def test_including_recorded_names_keeps_the_set_when_nothing_is_new() -> None:
    gpus = Accelerators.of(["nvidia.com/gpu"])
    assert gpus.including(["nvidia.com/gpu"]) is gpus
    assert gpus.including([NEURON]).names == {"nvidia.com/gpu", NEURON}


RECORDS: list[tuple[str, tuple[str, ...], frozenset[str], str]] = [
    ("none requested", ("nvidia.com/gpu",), frozenset({"cpu"}), ""),
    ("sorted, only the policy's", ("nvidia.com/gpu", NEURON, "amd.com/gpu"),
     frozenset({NEURON, "nvidia.com/gpu", "cpu", "example.com/nic"}),
     f"{NEURON},nvidia.com/gpu"),
]


@pytest.mark.parametrize(("policy_names", "resources", "want"), [r[1:] for r in RECORDS],
                         ids=[r[0] for r in RECORDS])
def test_the_record_names_the_requested_accelerators_and_reads_back(
        policy_names: tuple[str, ...], resources: frozenset[str], want: str) -> None:
    value = to_record(policy_names, resources)
    assert value == want
    assert recorded(value) == set(policy_names) & resources


@pytest.mark.parametrize(("value", "want"), [
    (f" {NEURON} ,, nvidia.com/gpu", {NEURON, "nvidia.com/gpu"}),
    ("cpu,memory,hugepages-2Mi,kubernetes.io/batch", set()),  # never counted as GPUs
    ("", set()),
])
def test_a_hand_written_record_counts_only_extended_resources(value: str,
                                                              want: set[str]) -> None:
    assert recorded(value) == want


# --- the pre-filter and the policy's names ----------------------------------------------

NAMES: list[tuple[str, bool]] = [
    ("nvidia.com/gpu", True), (MIG, True), ("nvidia.com/gpu.shared", True), (NEURON, True),
    ("amd.com/gpu", True), ("gpu.intel.com/i915", True), ("example.com/foo", True),
    ("cpu", False), ("memory", False), ("hugepages-2Mi", False), ("ephemeral-storage", False),
    ("gpu", False), ("kubernetes.io/gpu", False), ("node.kubernetes.io/gpu", False),
    ("requests.nvidia.com/gpu", False),
]


@pytest.mark.parametrize(("name", "want"), NAMES)
def test_extended_is_kubernetes_extended_resource_test(name: str, want: bool) -> None:
    assert extended(name) is want


def _conditions(text: str) -> dict[str, list[dict[str, str]]]:
    def squeeze(conditions: list[dict[str, str]]) -> list[dict[str, str]]:
        return [{k: " ".join(v.split()) for k, v in c.items()} for c in conditions]
    return {hook["name"]: squeeze(hook["matchConditions"])
            for doc in yaml.safe_load_all(text) if doc for hook in doc["webhooks"]}


def test_the_deployed_webhooks_carry_exactly_the_pre_filter_in_code() -> None:
    deployed = _conditions((ROOT / "deploy/base/webhook-configurations.yaml").read_text())
    expected = {name: [{k: " ".join(v.split()) for k, v in c.items()} for c in conditions]
                for name, conditions in MATCH_CONDITIONS.items()}
    assert deployed == expected


ERRORS: list[tuple[str, str]] = [
    ("gpu", "'gpu' is not an extended resource"),
    ("kubernetes.io/gpu", "'kubernetes.io/gpu' is not an extended resource"),
    ("requests.nvidia.com/gpu", "is not an extended resource"),
    ("Nvidia.com/gpu", "'Nvidia.com/gpu' is not a valid resource name"),
    ("nvidia.com/gpu/0", "'nvidia.com/gpu/0' is not a valid resource name"),
    ("nvidia.com/", "'nvidia.com/' is not a valid resource name"),
]


def _policy_dir(tmp_path: Path, accelerators: list[str]) -> Path:
    shutil.copy(BASE_POLICY, tmp_path / BASE_POLICY.name)
    (tmp_path / "10-scope.yaml").write_text(
        policy_yaml("scope", {"scope": {"accelerators": accelerators}}))
    return tmp_path


@pytest.mark.parametrize(("name", "message"), ERRORS)
def test_lint_rejects_an_accelerator_the_pre_filter_would_not_pass(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, message: str) -> None:
    directory = _policy_dir(tmp_path, [NEURON, name])
    lines = (directory / "10-scope.yaml").read_text().splitlines()
    line = next(i for i, text in enumerate(lines, 1) if text.endswith(f"- {name}"))
    with pytest.raises(PolicyError) as e:
        load_policy(directory)
    (problem,) = e.value.problems
    assert (Path(problem.file).name, problem.line) == ("10-scope.yaml", line)
    assert problem.message.startswith("spec.scope.accelerators.1: ")
    assert message in problem.message
    assert name_problem(name) is not None
    assert main(["lint", str(directory)]) == 1
    assert f"10-scope.yaml:{line}: spec.scope.accelerators.1: " in capsys.readouterr().out


def test_a_policy_may_name_any_extended_resource(tmp_path: Path) -> None:
    policy = load_policy(_policy_dir(tmp_path, [NEURON, MIG]))
    assert {NEURON, MIG, "nvidia.com/gpu"} <= set(policy.accelerators)


# --- what the webhook records -----------------------------------------------------------

def _mutated(obj: dict[str, Any], policy: Policy) -> dict[str, Any]:
    view = PodView.parse(obj)
    patch = mutate(view, classify(view, policy), policy, "CREATE").patch
    result: dict[str, Any] = jsonpatch.apply_patch(obj, list(patch))
    again = PodView.parse(result)
    assert mutate(again, classify(again, policy), policy, "CREATE").patch == []
    return result


def _neuron_member() -> dict[str, Any]:
    return pod().gpus(8, NEURON).gpus(1, "example.com/nic").gang("g", 2).build()


def test_the_webhook_records_the_accelerators_a_pod_requests(policy: Policy) -> None:
    neuron = policy.model_copy(update={"accelerators": (*policy.accelerators, NEURON)})
    mutated = _mutated(_neuron_member(), neuron)
    assert mutated["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == NEURON


def test_a_hand_written_record_is_replaced(policy: Policy) -> None:
    neuron = policy.model_copy(update={"accelerators": (*policy.accelerators, NEURON)})
    obj = _neuron_member()
    obj["metadata"]["annotations"][ACCELERATORS_ANNOTATION] = "memory"
    assert _mutated(obj, neuron)["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == NEURON


def test_a_pod_of_another_accelerator_is_not_the_webhooks(policy: Policy) -> None:
    view = PodView.parse(_neuron_member())
    assert not classify(view, policy).in_scope


# --- what the controller counts ---------------------------------------------------------

WITH_NEURON = POLICY_DEFAULT.including([NEURON])


def test_a_neuron_gang_waits_on_nodes_without_neuron_saying_what_it_needs() -> None:
    pods = gang("n", 2, resource=NEURON)
    (message,) = waits(decide(tracked(cluster({"a": 4}), pods, accelerators=WITH_NEURON),
                              {}, NOW)).values()
    assert message.endswith(f"needs 16 GPUs, and no node is eligible: none is Ready, "
                            f"schedulable, has {NEURON}, tolerated and matched by the pods' "
                            f"node selection")


def test_a_neuron_gang_goes_where_neuron_is() -> None:
    nodes = cluster({"a": 4}) + cluster({"b": 2}, resource=NEURON)
    actions = decide(tracked(nodes, gang("n", 2, resource=NEURON), accelerators=WITH_NEURON),
                     {}, NOW)
    assert admitted(actions) == {"n": "b"}


def test_a_gang_recorded_under_an_older_policy_is_still_counted() -> None:
    nodes = cluster({"a": 1}) + cluster({"b": 1}, resource=NEURON)
    pods = gang("n", 2, resource=NEURON, recorded=NEURON)
    snap = snapshot(nodes, pods, POLICY_DEFAULT)
    assert snap.need(pods) == 16
    assert snap.free_gpus(["b-n0"]) == 8
    (message,) = waits(decide(tracked(nodes, pods), {}, NOW)).values()
    assert "needs 16 GPUs" in message


def test_the_controller_refuses_to_start_without_a_valid_policy(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    directory = _policy_dir(tmp_path, ["gpu"])
    assert main(["controller", "--policies", str(directory), "--metrics-port", "0"]) == 1
    err = capsys.readouterr().err
    assert f"no valid policy in {directory}" in err
    assert "10-scope.yaml:8: spec.scope.accelerators.0: " in err


# --- lint of a deployed pre-filter ------------------------------------------------------

DEPLOYED = ROOT / "deploy" / "base" / "webhook-configurations.yaml"
OLD_EXPRESSION = ("object.spec.containers.exists(c, has(c.resources) && has(c.resources.limits) "
                  "&& c.resources.limits.exists(r, r.contains('gpu')))")


def _configurations(edit: str) -> str:
    """deploy/'s configurations, changed as a cluster might have them."""
    docs = [d for d in yaml.safe_load_all(DEPLOYED.read_text()) if d]
    if edit == "gpu-only pre-filter":
        for doc in docs:
            doc["webhooks"][0]["matchConditions"][0]["expression"] = OLD_EXPRESSION
    if edit == "kubectl list":
        return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": docs})
    if edit == "no validating webhook":
        docs = docs[:1]
    return yaml.safe_dump_all(docs)


# edit: the problems, as (whether it names the line of the matchConditions key, text)
DEPLOYMENTS: list[tuple[str, list[tuple[bool, str]]]] = [
    ("as deploy/ has it", []),
    ("kubectl list", []),
    ("gpu-only pre-filter", [
        (True, "webhook mutate.gpu-airlock.io: its matchConditions are not Airlock's "
               "pre-filter"),
        (True, "webhook validate.gpu-airlock.io: its matchConditions are not Airlock's "
               "pre-filter")]),
    ("no validating webhook", [(False, "webhook validate.gpu-airlock.io is not configured "
                                       "in this file")]),
]


@pytest.mark.parametrize(("edit", "want"), DEPLOYMENTS,
                         ids=[d[0] for d in DEPLOYMENTS])
def test_lint_says_where_a_deployed_pre_filter_is_not_airlocks(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str,
        want: list[tuple[bool, str]]) -> None:
    deployed = tmp_path / "deployed.yaml"
    deployed.write_text(_configurations(edit))
    lines = deployed.read_text().splitlines()
    conditions = [i for i, text in enumerate(lines, 1) if text.strip() == "matchConditions:"]
    # The lines of the edited (first) webhook's conditions in each configuration.
    where = [next((i for i in conditions if i > k), 0)
             for k, text in enumerate(lines, 1) if text.startswith("kind:")]
    code = main(["lint", str(POLICIES), "--webhook-configurations", str(deployed)])
    out = capsys.readouterr().out.splitlines()
    assert code == (1 if want else 0)
    if not want:
        assert out[-1].endswith("ok — Airlock's pre-filter, which passes every accelerator "
                                "above")
        return
    assert len(out) == len(want)
    for line, (has_line, text), hook_line in zip(out, want, where, strict=False):
        prefix = f"{deployed}:{hook_line}: " if has_line else f"{deployed}: "
        assert line.startswith(prefix + text), line
        assert "(nvidia.com/gpu, amd.com/gpu" in line or not has_line
