"""The harness itself, against the real apiserver and scheduler: what the other end-to-end
tests take for granted (RBAC, the default admission plugins, identities, scheduling on
fake GPU nodes, a clean teardown) is checked here, with Airlock's webhook out of the way
(the namespaces carry the ignore label)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import pod
from tests.e2e.conftest import NamespaceFactory, alive
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.sandbox import controlplane, wiring
from webhook.sandbox.binaries import KUBERNETES_VERSION, Binaries
from webhook.sandbox.clients import from_kubeconfig, from_token, service_account_token
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import (
    BLOCK_LABEL,
    CLIQUE_LABEL,
    GPU,
    HOST_LABEL,
    Shape,
    create_nodes,
    node_manifest,
    topology,
)

IGNORED = {IGNORE_NAMESPACE_LABEL: "true"}


async def stored_pod(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    response = await client.CoreV1Api(api).read_namespaced_pod(
        name, ns, _preload_content=False)
    body: dict[str, Any] = await response.json()
    return body


async def eventually(check: Callable[[], Awaitable[bool]], what: str,
                     within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {within:.0f}s: {what}")
        await asyncio.sleep(0.2)


def message(e: ApiException) -> str:
    """The Status message of a refusal, unescaped."""
    status: dict[str, Any] = json.loads(e.body or "{}")
    return str(status.get("message", ""))


async def who_am_i(api: client.ApiClient) -> tuple[str, list[str]]:
    review = await client.AuthenticationV1Api(api).create_self_subject_review(
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    info = review.status.user_info
    return info.username, list(info.groups or [])


# --- the apiserver: up, RBAC, identities ----------------------------------------------

async def test_apiserver_is_up_and_rbac_denies_an_ordinary_user(
        control_plane: ControlPlane, api: client.ApiClient) -> None:
    await client.CoreV1Api(api).list_secret_for_all_namespaces()  # admin: system:masters
    alice = control_plane.kubeconfig_for("alice", ("team-a",))
    async with await from_kubeconfig(alice) as as_alice:
        user, groups = await who_am_i(as_alice)
        assert (user, "team-a" in groups) == ("alice", True)
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(as_alice).list_secret_for_all_namespaces()
    assert denied.value.status == 403
    assert 'User "alice" cannot list resource "secrets"' in message(denied.value)


async def test_a_service_account_token_authenticates_as_that_account(
        control_plane: ControlPlane, api: client.ApiClient,
        namespaces: NamespaceFactory) -> None:
    ns = await namespaces(IGNORED)
    await client.CoreV1Api(api).create_namespaced_service_account(
        ns, body={"metadata": {"name": "robot"}})
    token = await service_account_token(api, ns, "robot", seconds=600)
    async with from_token(control_plane.url, control_plane.ca_file, token) as as_robot:
        user, groups = await who_am_i(as_robot)
        assert user == f"system:serviceaccount:{ns}:robot"
        assert f"system:serviceaccounts:{ns}" in groups
        with pytest.raises(ApiException) as denied:
            await client.CoreV1Api(as_robot).list_namespaced_pod(ns)
    assert denied.value.status == 403


@pytest.mark.skipif(bool(os.environ.get("KUBEBUILDER_ASSETS")),
                    reason="envtest assets carry their own release")
async def test_apiserver_reports_the_pinned_release(api: client.ApiClient) -> None:
    """A module build says v0.0.0-master unless the version is linked in."""
    info = await client.VersionApi(api).get_code()
    assert (info.git_version, info.major, info.minor) == \
        (KUBERNETES_VERSION, "1", KUBERNETES_VERSION.split(".")[1])


def test_metrics_are_the_apiservers_own(control_plane: ControlPlane) -> None:
    text = control_plane.metrics()
    assert "apiserver_request_total{" in text
    # The histogram the admission benchmark reads exists (empty until a webhook is called).
    assert "apiserver_admission_webhook_admission_duration_seconds" in text or \
        "apiserver_admission_controller_admission_duration_seconds" in text


# --- default admission plugins --------------------------------------------------------

async def test_priority_plugin_stores_the_numeric_priority_of_the_class(
        api: client.ApiClient, namespaces: NamespaceFactory) -> None:
    ns = await namespaces(IGNORED)
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    await wiring.apply_priority_classes(api, [(name, 4242, "Never")])
    try:
        core = client.CoreV1Api(api)
        await core.create_namespaced_pod(
            ns, body=pod("p", ns).cpu("100m", "64Mi").set("priorityClassName", name).build())
        spec = (await stored_pod(api, ns, "p"))["spec"]
        assert (spec["priority"], spec["preemptionPolicy"]) == (4242, "Never")
        with pytest.raises(ApiException) as unknown:
            await core.create_namespaced_pod(
                ns, body=pod("q", ns).set("priorityClassName", "no-such-class").build())
        assert unknown.value.status == 403
        assert "no PriorityClass with name no-such-class was found" in message(unknown.value)
    finally:
        await client.SchedulingV1Api(api).delete_priority_class(name)


async def test_pod_security_admission_is_on(api: client.ApiClient,
                                            namespaces: NamespaceFactory) -> None:
    ns = await namespaces({**IGNORED, "pod-security.kubernetes.io/enforce": "restricted"})
    privileged = pod("root", ns).build()
    privileged["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    with pytest.raises(ApiException) as denied:
        await client.CoreV1Api(api).create_namespaced_pod(ns, body=privileged)
    assert denied.value.status == 403
    assert "violates PodSecurity" in message(denied.value)


async def test_service_account_plugin_needs_the_default_account_we_create(
        api: client.ApiClient) -> None:
    """Why wiring.create_namespace makes `default`: with no controller-manager, nothing
    else would, and the ServiceAccount admission plugin rejects the pod."""
    core = client.CoreV1Api(api)
    bare = f"e2e-bare-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(body={"metadata": {"name": bare, "labels": IGNORED}})
    try:
        with pytest.raises(ApiException) as denied:
            await core.create_namespaced_pod(bare, body=pod("p", bare).build())
        assert denied.value.status == 403
        assert 'serviceaccount "default" not found' in message(denied.value)
    finally:
        await core.delete_namespace(bare)


# --- fake GPU nodes and the real scheduler --------------------------------------------

NodePool = tuple[str, list[str]]  # the pool's label value (= its taint key suffix), nodes


@pytest.fixture
async def gpu_pool(api: client.ApiClient) -> AsyncIterator[NodePool]:
    """Two fake 8-GPU nodes of this test's own: labelled and tainted with a pool name, so
    the session's other nodes and pods neither use them nor are disturbed by them."""
    pool = f"pool-{uuid.uuid4().hex[:6]}"
    nodes = [node_manifest(f"{pool}-{i}", 8, {"e2e.gpu-airlock.io/pool": pool,
                                              CLIQUE_LABEL: f"{pool}-clique"},
                           "NVIDIA-H100-80GB-HBM3", taint=False) for i in range(2)]
    for node in nodes:
        node["spec"]["taints"] = [{"key": f"e2e.gpu-airlock.io/{pool}",
                                   "effect": "NoSchedule"}]
    await create_nodes(api, nodes)
    names = [n["metadata"]["name"] for n in nodes]
    yield pool, names
    for name in names:
        await client.CoreV1Api(api).delete_node(name)


def pool_pod(name: str, ns: str, pool: str, gpus: int) -> dict[str, Any]:
    return (pod(name, ns).gpus(gpus)
            .set("nodeSelector", {"e2e.gpu-airlock.io/pool": pool})
            .set("tolerations", [{"key": f"e2e.gpu-airlock.io/{pool}", "operator": "Exists",
                                  "effect": "NoSchedule"}])
            .build())


async def read_node(api: client.ApiClient, name: str) -> dict[str, Any]:
    response = await client.CoreV1Api(api).read_node(name, _preload_content=False)
    node: dict[str, Any] = await response.json()
    return node


async def test_fake_node_is_ready_with_gpu_capacity_and_its_own_taints(
        api: client.ApiClient, gpu_pool: NodePool) -> None:
    pool, names = gpu_pool
    node = await read_node(api, names[0])
    assert node["status"]["allocatable"][GPU] == "8"
    assert node["status"]["capacity"]["cpu"] == "96"
    assert node["metadata"]["labels"][HOST_LABEL] == names[0]
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready == {"Ready": "True"}
    # TaintNodesByCondition's not-ready taint is gone; only the pool's own remains.
    assert [t["key"] for t in node["spec"]["taints"]] == [f"e2e.gpu-airlock.io/{pool}"]


async def test_scheduler_binds_what_fits_and_leaves_the_rest_pending(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    pool, names = gpu_pool
    before = {n: (await read_node(api, n))["metadata"]["resourceVersion"] for n in names}
    ns = await namespaces(IGNORED)
    core = client.CoreV1Api(api)
    await core.create_namespaced_pod(ns, body=pool_pod("fits", ns, pool, 8))
    await core.create_namespaced_pod(ns, body=pool_pod("too-big", ns, pool, 16))

    async def bound() -> bool:
        return bool((await stored_pod(api, ns, "fits"))["spec"].get("nodeName"))

    async def unschedulable() -> bool:
        conditions = (await stored_pod(api, ns, "too-big"))["status"].get("conditions", [])
        return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
                   for c in conditions)

    await eventually(bound, "the 8-GPU pod bound to a node")
    await eventually(unschedulable, "the 16-GPU pod marked Unschedulable")
    assert (await stored_pod(api, ns, "fits"))["spec"]["nodeName"] in names
    too_big = await stored_pod(api, ns, "too-big")
    assert "nodeName" not in too_big["spec"]
    why = next(c["message"] for c in too_big["status"]["conditions"]
                   if c["type"] == "PodScheduled")
    assert f"Insufficient {GPU}" in why
    # No kubelet, no node controller: nothing rewrote the nodes while the scheduler
    # worked, so they stay Ready with the capacity they were made with.
    for name in names:
        node = await read_node(api, name)
        assert node["metadata"]["resourceVersion"] == before[name]
        assert {"type": "Ready", "status": "True"}.items() <= \
            node["status"]["conditions"][0].items()


def test_topology_shape_labels_every_level() -> None:
    nodes = topology(Shape(nodes=16, gpus_per_node=4, nodes_per_domain=4,
                           domains_per_block=2, taint_gpus=False))
    labels = [n["metadata"]["labels"] for n in nodes]
    assert len({n["metadata"]["name"] for n in nodes}) == 16
    assert len({lab[CLIQUE_LABEL] for lab in labels}) == 4
    assert len({lab[BLOCK_LABEL] for lab in labels}) == 2
    # A clique never straddles two blocks.
    block_of: dict[str, set[str]] = {}
    for lab in labels:
        block_of.setdefault(lab[CLIQUE_LABEL], set()).add(lab[BLOCK_LABEL])
    assert all(len(blocks) == 1 for blocks in block_of.values())
    assert all(n["status"]["allocatable"][GPU] == "4" for n in nodes)
    assert all(n["spec"]["taints"] == [] for n in nodes)


# --- teardown -------------------------------------------------------------------------

def test_stop_leaves_no_process_or_directory(binaries: Binaries) -> None:
    with ControlPlane(binaries) as plane:
        pids = [c.process.pid for c in plane.components]
        workdir = plane.workdir
        print(f"second control plane started in {plane.start_seconds:.1f}s")
        assert len(pids) == 3
        assert all(alive(p) for p in pids)
    assert not any(alive(p) for p in pids)
    assert not workdir.exists()


OWNER = """
import json, sys
from pathlib import Path
from webhook.sandbox.binaries import KUBERNETES_VERSION, Binaries
from webhook.sandbox.controlplane import ControlPlane
plane = ControlPlane(Binaries(*map(Path, sys.argv[1:5]))).start()
print(json.dumps({"pids": [c.process.pid for c in plane.components],
                  "workdir": str(plane.workdir)}), flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(controlplane.SETPRIV is None and os.environ.get("CI") != "true",
                    reason="setpriv (util-linux) is not installed")
def test_a_killed_test_run_takes_its_control_plane_with_it(binaries: Binaries) -> None:
    """SIGKILL (a CI timeout, an OOM kill) runs no atexit and no fixture teardown."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(binaries.etcd), str(binaries.kube_apiserver),
         str(binaries.kube_scheduler), str(binaries.kubectl)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=Path(__file__).resolve().parents[2])
    assert owner.stdout is not None
    started = json.loads(owner.stdout.readline())
    pids: list[int] = started["pids"]
    try:
        assert len(pids) == 3
        assert all(alive(p) for p in pids)
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(alive(p) for p in pids)
    finally:
        for pid in pids:
            if alive(pid):
                os.killpg(pid, signal.SIGKILL)
        shutil.rmtree(started["workdir"], ignore_errors=True)
