"""The Go-module builder's cache and KWOK's stages as the sandbox adjusts them, without
building or downloading anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from webhook.sandbox.binaries import KUBERNETES, KWOK
from webhook.sandbox.gobuilding import GoModule, GoTool
from webhook.sandbox.stages import DELAY, OWNER_KIND, adjust

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
