"""Predicted starts on the real control plane: a gated gang is told when it will start
(the annotation gpu-airlock.io/predicted-start, a PredictedStart event, `airlock status
-o json`, `kubectl airlock why`), from the stated run time of the gang whose room it
waits for; that gang ends then, and the waiting one starts within the margin. The
cluster: 8 nodes of 8 GPUs in two NVLink domains of 4. No kubelet runs the pods: the test
marks them Running, and ends the blocker by deleting its pods at its stated end."""

from __future__ import annotations

import asyncio
import datetime
import json
import sys
import time
from pathlib import Path

from kubernetes_asyncio import client

from tests.commands import airlock_command
from tests.kube import Controllers, all_bound, create_gang, events, gated, pods_of, until
from webhook.keys import (
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_NAME_LABEL,
    PREDICTED_START_ANNOTATION,
)
from webhook.sandbox.controlplane import ControlPlane

RUNTIME = 25
# How far from its prediction the gang may start: a round's latency, the watch's, and
# the second the API's startTime is truncated to.
WITHIN = 10.0


def _at(text: str) -> float:
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


async def _running(api: client.ApiClient, namespace: str, prefix: str) -> float:
    """Mark the gang's pods Running since now, as a kubelet would; when that is."""
    now = datetime.datetime.now(datetime.UTC).replace(microsecond=0)
    for pod in await pods_of(api, namespace, prefix):
        await client.CoreV1Api(api).patch_namespaced_pod_status(
            pod["metadata"]["name"], namespace,
            body={"status": {"phase": "Running",
                             "startTime": now.strftime("%Y-%m-%dT%H:%M:%SZ")}})
    return now.timestamp()


async def _predicted(api: client.ApiClient, namespace: str, prefix: str) -> str | None:
    found = {(p["metadata"].get("annotations") or {}).get(PREDICTED_START_ANNOTATION)
             for p in await pods_of(api, namespace, prefix)}
    return found.pop() if len(found) == 1 else None


async def test_a_gated_gang_starts_when_predicted(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        control_plane: ControlPlane, session_policies: Path) -> None:
    controllers.start()
    # A gang of a stated run time on one domain, one of no stated end on the other.
    await create_gang(api, namespace, "blocker", 4,
                      annotations={EXPECTED_RUNTIME_ANNOTATION: f"{RUNTIME}s"})
    await create_gang(api, namespace, "wall", 4)
    await until(lambda: all_bound(api, namespace, "blocker", 4))
    await until(lambda: all_bound(api, namespace, "wall", 4))
    started = await _running(api, namespace, "blocker")
    await _running(api, namespace, "wall")
    end = started + RUNTIME

    # A whole domain's gang waits: for the blocker's, which frees at its stated end.
    await create_gang(api, namespace, "next", 4)

    async def told() -> bool:
        return await _predicted(api, namespace, "next") is not None

    await until(told)
    value = await _predicted(api, namespace, "next")
    assert value is not None
    assert _at(value) == end
    assert f"expected to start {value}" in await events(api, namespace, "next-0")
    assert "PredictedStart" in await events(api, namespace, "next-0", of="reason")
    # `airlock status` says the same, as a person would run it.
    kubeconfig = control_plane.admin_kubeconfig
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(kubeconfig),
                         "--policies", str(session_policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    (line,) = [w for w in json.loads(out)["waiting"] if w["gang"] == f"{namespace}/next"]
    assert (line["predictedStart"], line["predictionBlocker"]) == (value, None)
    assert all(gated(p) for p in await pods_of(api, namespace, "next"))
    # `kubectl airlock why`, as the person whose job waits would ask.
    asked = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "kubectl-airlock"), "why", "next-0",
        "-n", namespace, "--kubeconfig", str(kubeconfig), "--policies",
        str(session_policies), stdout=asyncio.subprocess.PIPE)
    said, _ = await asyncio.wait_for(asked.communicate(), 60)
    assert asked.returncode == 0
    rows = dict(row.split(":", 1) for row in said.decode().splitlines()[1:] if ":" in row)
    assert rows["Reason"].strip().startswith(line["reason"])
    assert rows["Starts"].strip() == value

    # The blocker ends at its stated end; the waiting gang starts then.
    await asyncio.sleep(max(end - time.time(), 0))
    await client.CoreV1Api(api).delete_collection_namespaced_pod(
        namespace, label_selector=f"{GANG_NAME_LABEL}=blocker",
        grace_period_seconds=0)
    await until(lambda: all_bound(api, namespace, "next", 4), within=WITHIN)
    assert abs(time.time() - end) <= WITHIN
