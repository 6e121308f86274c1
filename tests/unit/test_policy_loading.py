"""Policy files: loading, merging in a defined order, errors at file:line, hot reload."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.server.conftest import KubeletDir
from webhook.policy.loading import PolicyError, load_policy, policy_files
from webhook.policy.reloading import PolicyStore
from webhook.policy.schema import schema_text

ROOT = Path(__file__).resolve().parents[2]
HEADER = "apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\n"
DEFAULTS = {p.name: p.read_text() for p in sorted((ROOT / "policies").glob("*.yaml"))}


def write(tmp: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp / name).write_text(text)
    return tmp


def problems(tmp: Path, files: dict[str, str]) -> list[str]:
    with pytest.raises(PolicyError) as caught:
        load_policy(write(tmp, files))
    return [str(p) for p in caught.value.problems]


def test_default_policies_load() -> None:
    policy = load_policy(ROOT / "policies")
    assert set(policy.classes) == {"training", "inference", "scavenger"}
    assert policy.classes["scavenger"].priority_class.preemption_policy == "Never"
    values = {c: s.priority_class.value for c, s in policy.classes.items()}
    assert values["inference"] > values["training"] > values["scavenger"]
    assert {"kube-system", "airlock-system"} <= policy.excluded_namespaces


@pytest.mark.parametrize("example", sorted(p.name for p in (ROOT / "policies" / "examples")
                                           .iterdir() if p.is_dir()))
def test_every_example_loads_on_its_own(example: str) -> None:
    load_policy(ROOT / "policies" / "examples" / example)


BROKEN: list[tuple[str, dict[str, str], str]] = [
    ("wrong type", {"50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n  rules:\n"
                    "    - name: r\n      class: training\n      match:\n"
                    "        inGang: maybe\n"},
     "50-x.yaml:9: spec.rules.0.match.inGang"),
    ("unknown field", {"50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n  clases: {}\n"},
     "50-x.yaml:5: spec.clases: unknown field"),
    ("bad yaml", {"50-x.yaml": HEADER + "metadata: {name: x\nspec: {}\n"},
     "50-x.yaml:"),
    ("unknown class", {"50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n  rules:\n"
                       "    - {name: r, class: royalty}\n"},
     "50-x.yaml:6: spec.rules.0.class"),
    ("unknown topology level", {"10-classes.yaml": DEFAULTS["10-classes.yaml"].replace(
        "level: nvlink", "level: galaxy")},
     "10-classes.yaml:27: class training: topology level 'galaxy' is not one of"),
    ("class defined twice", {"50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n  classes:\n"
                             "    scavenger:\n      priorityClass: {name: s2, value: 1}\n"},
     "50-x.yaml:6: class 'scavenger' is already defined at "),
    ("policy name twice", {"50-x.yaml": HEADER + "metadata: {name: rules}\nspec: {}\n"},
     "50-x.yaml:3: policy 'rules' is already defined at "),
    ("rule name twice", {"50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n  rules:\n"
                         "    - {name: kserve, class: inference}\n"},
     "50-x.yaml:6: rule 'kserve' is already defined at "),
]


@pytest.mark.parametrize(("files", "expected"), [b[1:] for b in BROKEN],
                         ids=[b[0] for b in BROKEN])
def test_broken_policy_names_file_and_line(tmp_path: Path, files: dict[str, str],
                                           expected: str) -> None:
    found = problems(tmp_path, {**DEFAULTS, **files})
    assert any(expected in p for p in found), found


def test_lint_prints_file_line_and_exits_1(tmp_path: Path) -> None:
    write(tmp_path, {**DEFAULTS, "50-x.yaml": HEADER + "metadata: {name: x}\nspec:\n"
                     "  clases: {}\n"})
    out = subprocess.run([sys.executable, "-m", "webhook", "lint", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode == 1
    assert f"{tmp_path}/50-x.yaml:5: spec.clases: unknown field" in out.stdout
    ok = subprocess.run([sys.executable, "-m", "webhook", "lint", str(ROOT / "policies")],
                        capture_output=True, text=True)
    assert ok.returncode == 0 and "ok" in ok.stdout


def test_empty_directory_is_an_error(tmp_path: Path) -> None:
    assert any("no policy files" in p for p in problems(tmp_path, {}))


def test_committed_schema_is_current() -> None:
    assert (ROOT / "policies" / "schema.json").read_text() == schema_text(), \
        "run: airlock lint policies --schema policies/schema.json"


def test_reload_keeps_last_good_and_follows_kubelet_swaps(tmp_path: Path) -> None:
    mounted = KubeletDir(tmp_path / "policies")
    mounted.publish({k: v.encode() for k, v in DEFAULTS.items()})
    store = PolicyStore(mounted.path)
    assert store.reload_if_changed() == "reloaded"
    good = store.policy
    assert store.reload_if_changed() == "unchanged"
    broken = {**DEFAULTS, "20-rules.yaml": DEFAULTS["20-rules.yaml"] + "    - {name: x}\n"}
    mounted.publish({k: v.encode() for k, v in broken.items()})
    assert store.reload_if_changed() == "failed"
    assert store.policy is good and store.last_error and "20-rules.yaml" in store.last_error
    fixed = {**DEFAULTS, "20-rules.yaml": DEFAULTS["20-rules.yaml"].replace(
        "name: ray\n", "name: ray-clusters\n")}
    mounted.publish({k: v.encode() for k, v in fixed.items()})
    assert store.reload_if_changed() == "reloaded"
    assert store.last_error is None and store.policy is not good
    assert any(r.name == "ray-clusters" for r in store.policy.rules)


def test_team_access_example_merges_with_the_defaults() -> None:
    access = ROOT / "policies" / "examples" / "team-namespaces" / "access.yaml"
    files = [*policy_files(ROOT / "policies"), access]
    policy = load_policy(files)
    assert policy.allowed_classes("serving-llm") == ("inference",)
    assert policy.allowed_classes("notebooks") == ("scavenger",)
    assert set(policy.allowed_classes("default")) == {"training", "inference", "scavenger"}


def test_policy_reference_is_in_step_with_the_model() -> None:
    from webhook.policy.schema import reference_markdown
    assert (ROOT / "docs" / "policy-reference.md").read_text() == reference_markdown(), \
        "run: python -m webhook.policy.schema --markdown > docs/policy-reference.md"
