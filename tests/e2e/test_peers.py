"""`python -m bench.peers` end to end on a tiny trace (two gangs that cannot both fit, two
single pods; 4 nodes x 8 GPUs at 50x speed): the stock scheduler and Airlock always, and
each peer in its own test.

Peers this file requires: Kueue v0.12.3, built from its Go module by the test command's
build step (`python -m webhook.sandbox.binaries --peers kueue`). Where it is not built
its test skips, and under CI=true fails.

Coscheduling (scheduler-plugins v0.31.8) is not tested: the Go module proxy this project
reaches does not serve the Kubernetes modules its go.mod pins (k8s.io/kms and
k8s.io/cluster-bootstrap v0.31.8), so it cannot be built here (docs/alternatives.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from webhook.sandbox.peers import PEERS

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "bench" / "traces" / "tiny.jsonl"
KEYS = {"jobs", "completed", "makespan", "wait", "utilization", "partialGangGpuSeconds",
        "preemptions"}


def bench_peers(systems: str, out: Path) -> dict[str, Any]:
    run = subprocess.run(
        [sys.executable, "-m", "bench.peers", "--trace", str(TINY), "--systems", systems,
         "--nodes", "4", "--speed", "50", "--stall", "5", "--timeout", "60",
         "--out", str(out), "-o", "json"],
        cwd=ROOT, capture_output=True, text=True, timeout=170, check=False)
    assert run.returncode == 0, run.stderr[-3000:]
    body: dict[str, Any] = json.loads(run.stdout)
    return body


@pytest.mark.usefixtures("binaries")
def test_stock_and_airlock_run_the_trace_and_airlock_never_half_places_a_gang(
        tmp_path: Path) -> None:
    body = bench_peers("stock,airlock", tmp_path)
    assert set(body["systems"]) == {"stock", "airlock"}
    for summary in body["systems"].values():
        assert "error" not in summary
        assert summary.keys() >= KEYS
        assert summary["wait"].keys() >= {"p50", "p99"}
    airlock = body["systems"]["airlock"]
    assert airlock["completed"] == airlock["jobs"] == 4
    assert airlock["partialGangGpuSeconds"] == 0
    assert body["simulation"]["gap"].keys() == {"waitP50", "waitP99", "utilization"}
    assert {p.name for p in tmp_path.iterdir()} >= {"peers.md", "peers.json", "gpus.png"}


@pytest.mark.usefixtures("binaries")
@pytest.mark.parametrize("peer", ["kueue"])
def test_a_peer_runs_the_trace(peer: str, tmp_path: Path) -> None:
    op = PEERS[peer]
    if not all(op.tool.cached(name) for name in op.tool.commands):
        message = f"{peer} is not built ({op.tool.label}; cache {op.tool.bin_dir})"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    summary = bench_peers(peer, tmp_path)["systems"][peer]
    assert "error" not in summary, summary
    assert summary.keys() >= KEYS
    assert summary["completed"] == summary["jobs"] == 4
