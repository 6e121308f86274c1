"""The Go-module builder's cache and KWOK's stages as the sandbox adjusts them, without
building or downloading anything."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from webhook.sandbox import gobuilding
from webhook.sandbox.binaries import KUBERNETES, KWOK
from webhook.sandbox.gobuilding import GoModule, GoTool
from webhook.sandbox.stages import DELAY, OWNER_KIND, TERMINATION_DELAY, adjust

TOOL = GoTool(modules=(GoModule("demo", "example.com/demo", "v1.2.3"),),
              commands={"demo": "example.com/demo/cmd/demo"})


def test_a_binary_is_cached_only_with_the_stamp_of_its_recipe(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path))
    assert TOOL.directory == tmp_path / "demo-v1.2.3"
    assert not TOOL.cached("demo")
    TOOL.bin_dir.mkdir(parents=True)
    TOOL.binary("demo").write_text("#!/bin/sh\n")
    TOOL.binary("demo").chmod(0o755)
    assert not TOOL.cached("demo")  # no stamp: an interrupted build
    (TOOL.bin_dir / ".demo.recipe").write_text(TOOL.recipe)
    assert TOOL.cached("demo")
    newer = GoTool(modules=(GoModule("demo", "example.com/demo", "v1.2.3"),),
                   commands=TOOL.commands, ldflags="-s -w -X main.version=1.2.3")
    assert not newer.cached("demo")  # other flags, another recipe


def test_the_kubernetes_recipe_keeps_the_binaries_already_built() -> None:
    """Stamps written before the builder was generic stay valid: no rebuild of the
    Kubernetes binaries on upgrade."""
    assert KUBERNETES.directory.name == "k8s-v1.34.4-etcd-v3.6.4"
    assert KUBERNETES.recipe.startswith("k8s v1.34.4 etcd v3.6.4 ldflags -s -w -X ")
    assert "kube-controller-manager" in KUBERNETES.commands
    assert KWOK.directory.name == "kwok-v0.7.0"


def complete_stage() -> dict[str, Any]:
    return {"metadata": {"name": "pod-complete"}, "spec": {
        "selector": {"matchExpressions": [
            {"key": ".status.phase", "operator": "In", "values": ["Running"]},
            {"key": OWNER_KIND, "operator": "In", "values": ["Job"]}]},
        "delay": {"durationMilliseconds": 1000, "jitterDurationMilliseconds": 5000,
                  "durationFrom": {"expressionFrom": f'.metadata.annotations["{DELAY}"]'}}}}


def test_only_a_pod_with_a_run_time_completes_and_after_exactly_that() -> None:
    stage = adjust(complete_stage())
    assert {"key": f'.metadata.annotations["{DELAY}"]', "operator": "Exists"} in \
        stage["spec"]["selector"]["matchExpressions"]
    assert "jitterDurationMilliseconds" not in stage["spec"]["delay"]
    keys = [e["key"] for e in stage["spec"]["selector"]["matchExpressions"]]
    assert OWNER_KIND not in keys  # a plain pod with a run time completes too
    other = {"metadata": {"name": "pod-ready"}, "spec": {}}
    assert adjust(other) == {"metadata": {"name": "pod-ready"}, "spec": {}}


def test_a_deleted_pod_goes_after_the_time_it_states_at_once_without() -> None:
    fast = {"metadata": {"name": "pod-delete"}, "spec": {"selector": {}, "next": {
        "finalizers": {"empty": True}, "delete": True}}}
    stage = adjust(fast)
    assert stage["spec"]["delay"] == {"durationMilliseconds": 0, "durationFrom": {
        "expressionFrom": f'.metadata.annotations["{TERMINATION_DELAY}"]'}}
    assert stage["spec"]["next"] == {"finalizers": {"empty": True}, "delete": True}


UPSTREAM: dict[str, dict[str, Any]] = {
    "example.com/big": {"Go": "1.24.0", "Replace": [
        # Into its own repository: the published module at the nested version instead.
        {"Old": {"Path": "example.com/api"}, "New": {"Path": "./staging/src/example.com/api"}},
        # To a published version: carried over as it is.
        {"Old": {"Path": "github.com/forked/lib", "Version": "v1.0.0"},
         "New": {"Path": "github.com/fork/lib", "Version": "v1.0.1-fix"}},
    ]},
    "example.com/small": {"Go": "1.22", "Replace": [
        {"Old": {"Path": "example.com/small/sibling"}, "New": {"Path": "../sibling"}},
        {"Old": {"Path": "github.com/forked/lib", "Version": "v1.0.0"},
         "New": {"Path": "github.com/other/lib", "Version": "v9.9.9"}},
    ]},
}


def test_the_synthetic_module_carries_the_upstream_replaces(
        monkeypatch: pytest.MonkeyPatch) -> None:
    tool = GoTool(modules=(GoModule("big", "example.com/big", "v1.34.4", "v0.34.4"),
                           GoModule("small", "example.com/small", "v3.6.4")),
                  commands={"big": "example.com/big/cmd/big"})
    monkeypatch.setattr(shutil, "which", lambda _: "/usr/bin/go")
    monkeypatch.setattr(gobuilding._Build, "upstream",
                        lambda _self, module: UPSTREAM[module.path])
    go_mod = gobuilding._Build(tool, ["big"], print).go_mod()
    assert "go 1.24.0\n" in go_mod  # the newest any module needs
    assert "\texample.com/big v1.34.4\n\texample.com/small v3.6.4\n" in go_mod
    replaces = [line for line in go_mod.splitlines() if line.startswith("replace ")]
    assert replaces == [
        "replace example.com/api => example.com/api v0.34.4",
        "replace github.com/forked/lib v1.0.0 => github.com/fork/lib v1.0.1-fix",
    ]  # the sibling replace dropped (no nested version); the first fork kept


def test_a_tool_sends_an_upstream_replace_to_a_served_version_and_rebuilds_on_a_change(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pinned = {"example.com/plugins": {"Go": "1.24.0", "Replace": [
        {"Old": {"Path": path}, "New": {"Path": path, "Version": version}}
        for path, version in (("example.com/api", "v0.34.7"), ("example.com/big", "v1.34.7"),
                              ("example.com/legacy", "v0.31.8"))]}}
    served = GoModule("plugins", "example.com/plugins", "v0.34.7",
                      replace_versions={"v0.34.7": "v0.34.4", "v1.34.7": "v1.34.4"})
    tool = GoTool(modules=(served,), commands={"plugins": "example.com/plugins/cmd"})
    monkeypatch.setattr(shutil, "which", lambda _: "/usr/bin/go")
    monkeypatch.setattr(gobuilding._Build, "upstream",
                        lambda _self, module: pinned[module.path])
    replaces = [line for line in gobuilding._Build(tool, ["plugins"], print).go_mod()
                .splitlines() if line.startswith("replace ")]
    assert replaces == [
        "replace example.com/api => example.com/api v0.34.4",
        "replace example.com/big => example.com/big v1.34.4",
        "replace example.com/legacy => example.com/legacy v0.31.8",  # not mapped: as is
    ]
    as_pinned = GoTool(modules=(GoModule("plugins", "example.com/plugins", "v0.34.7"),),
                       commands=tool.commands)
    assert as_pinned.directory == tool.directory
    assert len({as_pinned.recipe, tool.recipe}) == 2  # a binary built one way is not reused
    other = GoTool(modules=(GoModule("plugins", "example.com/plugins", "v0.34.7",
                                     replace_versions={"v0.34.7": "v0.34.5"}),),
                   commands=tool.commands)
    assert other.recipe != tool.recipe
