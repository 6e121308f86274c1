"""What explain, lint and serve do with input that is not what they expect, and with no
policy directory at all: unknown kinds, objects that make no pods, malformed workloads
(`file:line`, the rest still explained), a --policies that does not exist, and the
shipped default policy from any directory."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from tests.commands import Done, airlock
from tests.paths import POLICIES

DEPLOYMENT = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: serving}
spec:
  replicas: 1
  template:
    spec:
      containers: [{name: vllm, image: "vllm/vllm-openai:v0.8.5",
                    resources: {limits: {nvidia.com/gpu: "1"}}}]
"""
WIDGET = """\
apiVersion: acme.io/v1
kind: Widget
metadata: {name: w1}
"""


def explain(tmp_path: Path, text: str, *extra: str) -> Done:
    f = tmp_path / "objects.yaml"
    f.write_text(text)
    return airlock("explain", "-f", str(f), "--policies", str(POLICIES), "-o", "json",
                   *extra)


def workloads(done: Done) -> list[str]:
    return [orjson.loads(line)["workload"] for line in done.stdout.splitlines()]


def test_an_unknown_kind_alone_fails_naming_it_and_the_supported_ones(tmp_path: Path) -> None:
    done = explain(tmp_path, WIDGET)
    assert done.returncode == 1
    assert "objects.yaml:1: Widget/w1: unknown kind 'Widget' (apiVersion acme.io/v1)" \
        in done.stderr
    assert "Deployment.apps" in done.stderr
    assert "RayJob.ray.io" in done.stderr


def test_an_unknown_kind_beside_a_workload_is_an_error_that_fails_only_when_strict(
        tmp_path: Path) -> None:
    done = explain(tmp_path, f"{WIDGET}---\n{DEPLOYMENT}")
    assert done.returncode == 0
    assert "unknown kind 'Widget'" in done.stderr
    assert workloads(done) == ["Deployment/web"]
    assert explain(tmp_path, f"{WIDGET}---\n{DEPLOYMENT}", "--strict").returncode == 1


def test_objects_that_make_no_pods_are_skipped_with_a_note(tmp_path: Path) -> None:
    done = explain(tmp_path, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n---\n"
                   f"{DEPLOYMENT}")
    assert done.returncode == 0
    assert "objects.yaml:1: ConfigMap/cfg makes no pods: skipped" in done.stderr
    assert workloads(done) == ["Deployment/web"]


@pytest.mark.parametrize(("broken", "line", "message"), [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bad}\nspec:\n  replicas: 2\n",
     4, "Deployment/bad: spec.template: is missing: a pod template is required here"),
    ("apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: bad}\nspec:\n"
     "  replicas: three\n  template: {spec: {containers: []}}\n",
     5, "StatefulSet/bad: spec.replicas: 'three' is not a number"),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: bad}\nspec:\n  template:\n"
     "    spec:\n      containers: {name: x}\n",
     1, "Job/bad: not a valid Pod: spec.containers: expected a list"),
])
def test_a_malformed_workload_is_reported_at_its_line_and_the_others_still_explained(
        tmp_path: Path, broken: str, line: int, message: str) -> None:
    # The broken object (its `line` counted from its own first line) is the second
    # document, after a comment and a Deployment: 11 lines.
    text = f"# two objects\n{DEPLOYMENT}---\n{broken}---\n{DEPLOYMENT.replace('web', 'web2')}"
    done = explain(tmp_path, text)
    assert done.returncode == 1
    assert f"objects.yaml:{11 + line}: {message}" in done.stderr, done.stderr
    assert workloads(done) == ["Deployment/web", "Deployment/web2"]


def test_invalid_yaml_names_its_line(tmp_path: Path) -> None:
    done = explain(tmp_path, "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    assert done.returncode == 1
    assert "objects.yaml:4: not valid YAML or JSON" in done.stderr


@pytest.mark.parametrize("command", [["explain", "-f", "x.yaml"], ["lint"], ["serve"]])
def test_a_policies_directory_that_does_not_exist_is_an_error(
        command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    flag = [str(missing)] if command == ["lint"] else ["--policies", str(missing)]
    done = airlock(*command, *flag, cwd=tmp_path)
    assert done.returncode == 1
    assert f"{missing}: no such file or directory" in done.stderr


def test_explain_and_lint_use_the_shipped_policy_outside_a_checkout(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(DEPLOYMENT)
    done = airlock("explain", "-f", "web.yaml", "-o", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "using the default policy shipped with Airlock" in done.stderr
    (row,) = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert row["class"] == "inference"
    linted = airlock("lint", cwd=tmp_path)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "default policy shipped with Airlock" in linted.stderr


def test_a_checkout_uses_its_own_policies_quietly() -> None:
    done = airlock("lint")
    assert done.returncode == 0
    assert done.stdout.startswith("policies: ok")
    assert "shipped" not in done.stderr


def test_objects_from_stdin(tmp_path: Path) -> None:
    done = airlock("explain", "-f", "-", "--policies", str(POLICIES), "-o", "json",
                   stdin=f"{DEPLOYMENT}---\n{WIDGET}", cwd=tmp_path)
    assert done.returncode == 0
    assert workloads(done) == ["Deployment/web"]
    assert "<stdin>:11: Widget/w1: unknown kind" in done.stderr
