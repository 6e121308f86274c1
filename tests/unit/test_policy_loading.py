"""Loading a policy directory: which files count, the defaults, and the examples."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import shipped_policy
from tests.paths import BASE_POLICY, POLICIES, POLICY_EXAMPLES
from webhook.policy.linting import run_lint
from webhook.policy.loading import PolicyError, load_policy, policy_files

# Complete policies, each used instead of the defaults; the rest add to the defaults.
TOPOLOGY_EXAMPLES = ["aws-network-layers", "gke-topology", "nvidia-nvlink", "single-host"]


def test_defaults_classes_and_priorities() -> None:
    pcs = {c: s.priority_class for c, s in shipped_policy().classes.items()}
    assert {c: p.name for c, p in pcs.items()} == {
        "inference": "airlock-inference", "training": "airlock-training",
        "scavenger": "airlock-scavenger"}
    assert pcs["inference"].value > pcs["training"].value > pcs["scavenger"].value
    assert [c for c, p in pcs.items() if p.preemption_policy == "Never"] == ["scavenger"]


def test_defaults_scope_and_topology() -> None:
    defaults = shipped_policy()
    assert {"kube-system", "airlock-system"} <= defaults.excluded_namespaces
    assert defaults.schedulers == {"default-scheduler"}
    assert {"nvidia.com/gpu", "amd.com/gpu"} <= set(defaults.accelerators)
    assert defaults.topology_levels == {"nvlink": "nvidia.com/gpu.clique",
                                        "block": "cloud.google.com/gce-topology-block",
                                        "host": "kubernetes.io/hostname"}
    training = defaults.classes["training"]
    # Required would hold gangs forever on clusters without the clique label.
    assert training.topology is not None
    assert training.topology.mode == "preferred"
    assert all(any(t.key == "nvidia.com/gpu" and t.operator == "Exists" for t in s.tolerations)
               for s in defaults.classes.values())


def test_lint_accepts_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_lint(POLICIES) == 0
    assert "3 file(s), 3 classes, 10 rules" in capsys.readouterr().out


@pytest.mark.parametrize("example", TOPOLOGY_EXAMPLES)
def test_topology_example_stands_alone_with_the_default_rules(
        example: str, capsys: pytest.CaptureFixture[str]) -> None:
    defaults = shipped_policy()
    assert run_lint(POLICY_EXAMPLES / example) == 0, capsys.readouterr().out
    policy = load_policy(POLICY_EXAMPLES / example)
    # The examples differ from the defaults in topology only; the rest is copied so each
    # file reads whole, and this keeps the copies honest.
    assert policy.rules == defaults.rules
    assert (policy.excluded_namespaces, policy.schedulers, policy.accelerators) == \
        (defaults.excluded_namespaces, defaults.schedulers, defaults.accelerators)
    assert {c: s.priority_class for c, s in policy.classes.items()} == \
        {c: s.priority_class for c, s in defaults.classes.items()}


def test_every_example_is_covered() -> None:
    assert sorted(p.name for p in POLICY_EXAMPLES.iterdir()) == sorted(
        [*TOPOLOGY_EXAMPLES, "team-namespaces", "mig", "time-slicing"])


def test_nvidia_example_requires_one_nvlink_domain() -> None:
    training = load_policy(POLICY_EXAMPLES / "nvidia-nvlink").classes["training"]
    assert training.topology is not None
    assert (training.topology.level, training.topology.mode) == ("nvlink", "required")


def test_team_access_example_adds_to_the_defaults(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    for f in [*policy_files(POLICIES), *policy_files(POLICY_EXAMPLES / "team-namespaces")]:
        (tmp_path / f.name).write_bytes(f.read_bytes())
    assert run_lint(tmp_path) == 0, capsys.readouterr().out
    policy = load_policy(tmp_path)
    assert policy.allowed_classes("serving-llm") == ("inference",)
    assert policy.allowed_classes("research-vision") == ("training", "scavenger")
    assert policy.allowed_classes("notebooks") == ("scavenger",)
    assert set(policy.allowed_classes("default")) == {"training", "inference", "scavenger"}
    assert [q.name for q in policy.queues] == ["research", "product", "sandbox"]
    assert policy.queues[1].lending_limit == {"nvidia.com/gpu": 16}


def test_a_mounted_configmap_reads_only_its_files(tmp_path: Path) -> None:
    # The kubelet's layout: real files in a timestamped dir, `..data` pointing at it, and
    # one link per file through `..data`.
    version = tmp_path / "..2025_01_01_00_00_00.000000001"
    version.mkdir()
    (version / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    (version / "notes.txt").write_text("not a policy")
    (tmp_path / "..data").symlink_to(version.name)
    for name in ("00-base.yaml", "notes.txt"):
        (tmp_path / name).symlink_to(f"..data/{name}")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "x.yaml").write_text("not: read")
    (tmp_path / ".hidden.yaml").write_text("not: read")
    (tmp_path / "kustomization.yaml").write_text("kind: Kustomization\n")
    assert [p.name for p in policy_files(tmp_path)] == ["00-base.yaml"]
    assert load_policy(tmp_path).sources == (str(tmp_path / "00-base.yaml"),)


def test_files_load_in_name_order_and_yml_counts(tmp_path: Path) -> None:
    (tmp_path / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    (tmp_path / "20-late.yml").write_text(rules_doc("late", "ray.io/cluster"))
    (tmp_path / "10-early.yaml").write_text(rules_doc("early", "jobset.sigs.k8s.io/jobset-name"))
    assert [r.name for r in load_policy(tmp_path).rules] == ["kubeflow", "early", "late"]


def rules_doc(name: str, label: str) -> str:
    return (f"apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\nmetadata: {{name: "
            f"{name}}}\nspec:\n  rules:\n    - {{name: {name}, class: training, match: "
            f"{{hasAnyLabel: [{label}]}}}}\n")


@pytest.mark.parametrize(("layout", "message"), [
    ("empty", ": no policy files (*.yaml, *.yml) in the directory"),
    ("missing", ": cannot list policy directory: No such file or directory"),
    ("only comments", ": the policy files hold no documents"),
])
def test_nothing_to_load_is_an_error(tmp_path: Path, layout: str, message: str) -> None:
    directory = tmp_path / "policies"
    if layout != "missing":
        directory.mkdir()
    if layout == "only comments":
        (directory / "00-x.yaml").write_text("# nothing yet\n")
    with pytest.raises(PolicyError) as caught:
        load_policy(directory)
    assert str(caught.value).endswith(message), str(caught.value)
