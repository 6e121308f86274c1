"""Broken policies name the file and line a person must fix. The fixtures live in
testdata/policies/<case>/, each beside a link to the same valid base file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.commands import airlock
from tests.paths import TESTDATA_POLICIES
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.sources import read_documents

# case: every problem, as `file:line: message` (a message may be cut short)
CASES: dict[str, list[str]] = {
    "wrong-type": ["10-rules.yaml:11: spec.rules.0.match.inGang: Input should be a valid "
                   "boolean, unable to interpret input, got 'sometimes'"],
    "unknown-key": ["10-scope.yaml:7: spec.scope.excludedNamespace: unknown field"],
    "bad-yaml": ["10-scope.yaml:8: invalid YAML: expected ',' or ']', but got ':' "
                 "(while parsing a flow sequence at line 7)"],
    "unknown-level": [
        "00-policy.yaml:11: class training: topology.level 'rack' is not one of the "
        "topologyLevels (host)",
        "00-policy.yaml:15: class inference: placementLevel 'zone' is not one of the "
        "topologyLevels (host)"],
    "duplicate-class": ["10-classes.yaml:7: class 'training' is already defined at "
                        "{dir}/00-base.yaml:10"],
    "duplicate-rule": ["10-rules.yaml:10: rule 'kubeflow' is already defined at "
                       "{dir}/00-base.yaml:18"],
    "duplicate-key": ["10-rules.yaml:10: duplicate key 'rules' (first at line 6)"],
    "duplicate-policy-name": ["10-more.yaml:10: policy 'scope' is already defined at "
                              "{dir}/10-more.yaml:4"],
    "missing-class": [
        "10-rules.yaml:11: rule sweeps: class scavenger is not defined under spec.classes",
        "10-rules.yaml: spec.classes defines no inference or scavenger in any file; every "
        "class (training, inference, scavenger) needs a definition"],
    "not-a-mapping": ["10-list.yaml:2: a policy document must be a mapping"],
    "queue-namespace-twice": [
        "10-queues.yaml:13: queue team-b: namespace 'team-a' is already in queue team-a",
        "10-queues.yaml:14: queue team-b: namespace 'research-vision' is already in queue "
        "team-a (by 'research-*')"],
    "queue-bad-count": [
        "10-queues.yaml:10: spec.queues.0.nominal.nvidia.com/gpu: Input should be greater "
        "than or equal to 0, got -4",
        "10-queues.yaml:15: spec.queues.1.borrowingLimit.nvidia.com/gpu: Input should be a "
        "valid integer, got 1.5"],
    "device-class-references": [
        "10-devices.yaml:13: device class 'gpu.nvidia.com' is already defined at "
        "{dir}/10-devices.yaml:7",
        "10-devices.yaml:10: device class gpu.amd.com: accelerator 'amd.com/gpu' is not one "
        "of scope.accelerators (nvidia.com/gpu)",
        "10-devices.yaml:12: device class compute-domain-default-channel.nvidia.com: "
        "topology 'nvlink' is not one of the topologyLevels (host)"],
    "device-class-bad-name": [
        "10-devices.yaml:7: spec.deviceClasses.0.name: Value error, 'Not_A_Class' is not a "
        "DNS subdomain"],
    "grant-mistakes": [
        "10-grants.yaml:7: spec.grants.0: Value error, a grant names a `class` or "
        "`priorityClasses`, one of the two",
        "10-grants.yaml:8: spec.grants.1: Value error, a grant names a `class` or "
        "`priorityClasses`, one of the two",
        "10-grants.yaml:9: spec.grants.2.priorityClasses: Value error, 'Not_A_Class' is not "
        "a valid PriorityClass name"],
    "grant-of-a-class-priority": [
        "10-grants.yaml:10: grant: priorityClasses names airlock-inference, class "
        "inference's own PriorityClass; grant the class instead (class: inference)"],
    "preempts-without-a-gate": [
        "00-base.yaml:16: class inference: preempts: true with priorityClass.preemptionPolicy: "
        "Never needs queued: true: its single pods would carry no gate"],
    "queue-unknown-resource": [
        "10-queues.yaml:11: queue team-a: nominal names 'amd.com/gpu', which is not one of "
        "the policy's accelerators (nvidia.com/gpu)"],
}


@pytest.mark.parametrize("case", CASES)
def test_broken_policy_names_file_and_line(case: str) -> None:
    directory = TESTDATA_POLICIES / case
    with pytest.raises(PolicyError) as caught:
        load_policy(directory)
    found = [str(p) for p in caught.value.problems]
    expected = [f"{directory}/{e.format(dir=directory)}" for e in CASES[case]]
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want), found


def test_every_fixture_is_a_case() -> None:
    assert {p.name for p in TESTDATA_POLICIES.iterdir()} - {"base"} == set(CASES)


def test_the_base_fixture_is_valid() -> None:
    assert [r.name for r in load_policy(TESTDATA_POLICIES / "base").rules] == ["kubeflow"]


def test_problems_in_several_files_are_all_reported(tmp_path: Path) -> None:
    for case in ("unknown-key", "wrong-type"):
        (tmp_path / f"{case}.yaml").write_text(
            next((TESTDATA_POLICIES / case).glob("10-*.yaml")).read_text())
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path)
    assert [(Path(p.file).name, p.line) for p in caught.value.problems] == [
        ("unknown-key.yaml", 7), ("wrong-type.yaml", 11)]


YAML_CASES: list[tuple[str, str, str]] = [
    ("alias cycle", "a: &x [*x]\n", ":1: an alias refers to its own anchor"),
    ("tab indent", "a:\n\tb: 1\n", ":2: invalid YAML: found character '\\t'"),
    ("not utf-8", "\udcff", ": not UTF-8 text"),
]


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in YAML_CASES],
                         ids=[c[0] for c in YAML_CASES])
def test_yaml_mistakes(tmp_path: Path, text: str, expected: str) -> None:
    f = tmp_path / "p.yaml"
    f.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(PolicyError) as caught:
        read_documents(f)
    assert str(caught.value).startswith(f"{f}{expected}"), str(caught.value)


def test_lines_follow_multi_documents_and_merge_keys(tmp_path: Path) -> None:
    f = tmp_path / "p.yaml"
    f.write_text("a: 1\n---\nbase: &b\n  x: 1\n  y: 2\nuse:\n  <<: *b\n  y: 3\n")
    first, second = read_documents(f)
    assert first.line(("a",)) == 1
    assert second.data["use"] == {"x": 1, "y": 3}
    # y is written under `use`; x only arrives through the merge, so it points at `base`.
    assert second.line(("use", "y")) == 8
    assert second.line(("use", "x")) == 4
    assert second.line(("use", "z", 0)) == 6


def test_lint_prints_file_line_and_exits_1() -> None:
    directory = TESTDATA_POLICIES / "unknown-key"
    out = airlock("lint", str(directory))
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        f"{directory}/10-scope.yaml:7: spec.scope.excludedNamespace: unknown field (check "
        "the spelling; see docs/policy-reference.md)"]
