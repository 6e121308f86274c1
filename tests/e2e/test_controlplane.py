"""The harness itself, against the real apiserver, scheduler, controller-manager and
KWOK: what the other end-to-end tests take for granted (RBAC, the default admission
plugins, identities, scheduling on fake GPU nodes, pods that run, finish and go away, a
clean teardown) is checked here, mostly with Airlock's webhook out of the way (those
namespaces carry the ignore label). The last tests create what users create (a namespace
with kubectl, a Deployment) and see it go through Airlock's webhook."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import pod
from tests.kube import NamespaceFactory, kubectl
from tests.paths import ROOT
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.sandbox import wiring
from webhook.sandbox.binaries import Binaries, kubernetes_release
from webhook.sandbox.clients import from_kubeconfig, from_token, service_account_token
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import SETPRIV, alive
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
    release = kubernetes_release()  # the one the run chose ($AIRLOCK_KUBERNETES)
    assert (info.git_version, info.major, info.minor) == \
        (release.version, "1", release.minor.split(".")[1])


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


async def test_a_namespace_gets_its_default_service_account(
        api: client.ApiClient) -> None:
    """kube-controller-manager makes `default` in every new namespace, which the
    ServiceAccount admission plugin wants before it lets a pod in."""
    core = client.CoreV1Api(api)
    bare = f"e2e-bare-{uuid.uuid4().hex[:8]}"
    await core.create_namespace(body={"metadata": {"name": bare, "labels": IGNORED}})
    try:
        async def has_default() -> bool:
            accounts = await core.list_namespaced_service_account(bare)
            return any(a.metadata.name == "default" for a in accounts.items)

        await eventually(has_default, "the namespace's default ServiceAccount", within=10)
        await core.create_namespaced_pod(bare, body=pod("p", bare).build())
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
    # KWOK's node-initialize stage kept the capacity the node was made with.
    assert node["status"]["allocatable"][GPU] == "8"
    assert node["status"]["capacity"]["cpu"] == "96"
    assert node["metadata"]["labels"][HOST_LABEL] == names[0]
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions.pop("Ready") == "True"
    assert set(conditions.values()) <= {"False"}  # no pressure, network available
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("kwok-")
    # The node lifecycle controller lifted TaintNodesByCondition's not-ready taint once
    # KWOK reported the node Ready; only the pool's own remains.
    assert [t["key"] for t in node["spec"]["taints"]] == [f"e2e.gpu-airlock.io/{pool}"]


async def test_kwok_renews_each_fake_nodes_lease(api: client.ApiClient,
                                                 gpu_pool: NodePool) -> None:
    _, names = gpu_pool
    coordination = client.CoordinationV1Api(api)

    async def renewed() -> bool:
        try:
            lease = await coordination.read_namespaced_lease(names[0], "kube-node-lease")
        except ApiException:
            return False
        if lease.spec.renew_time is None:
            return False
        age = datetime.datetime.now(datetime.UTC) - lease.spec.renew_time
        return bool(lease.spec.holder_identity) and \
            age.total_seconds() < lease.spec.lease_duration_seconds and \
            lease.metadata.owner_references[0].name == names[0]

    await eventually(renewed, "a Lease for the fake node, held and renewed by KWOK")


async def test_scheduler_binds_what_fits_and_leaves_the_rest_pending(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    pool, names = gpu_pool
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
    # The nodes stay Ready with the capacity they were made with.
    for name in names:
        node = await read_node(api, name)
        assert node["status"]["allocatable"][GPU] == "8"
        assert {"type": "Ready", "status": "True"}.items() <= next(
            c for c in node["status"]["conditions"] if c["type"] == "Ready").items()


async def test_a_pod_bound_to_a_fake_node_runs_and_is_ready(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    pool, names = gpu_pool
    ns = await namespaces(IGNORED)
    await client.CoreV1Api(api).create_namespaced_pod(ns, body=pool_pod("p", ns, pool, 4))

    async def running() -> bool:
        status = (await stored_pod(api, ns, "p"))["status"]
        ready = any(c["type"] == "Ready" and c["status"] == "True"
                    for c in status.get("conditions", []))
        return status.get("phase") == "Running" and ready

    await eventually(running, "the bound pod Running and Ready (KWOK's pod-ready stage)")
    stored = await stored_pod(api, ns, "p")
    assert stored["spec"]["nodeName"] in names
    assert stored["status"]["podIP"].startswith("10.")
    assert stored["status"]["containerStatuses"][0]["state"]["running"]["startedAt"]


def pool_template(pool: str, gpus: int) -> dict[str, Any]:
    spec = pool_pod("x", "x", pool, gpus)["spec"]
    return {"metadata": {"labels": {"app": pool}}, "spec": spec}


async def test_a_job_with_a_run_time_succeeds(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    """KWOK's own annotation gives the pod its run time; the Job controller sees it
    succeed and completes the Job."""
    pool, _ = gpu_pool
    ns = await namespaces(IGNORED)
    template = pool_template(pool, 1)
    template["metadata"]["annotations"] = {"pod-complete.stage.kwok.x-k8s.io/delay": "2s"}
    template["spec"]["restartPolicy"] = "Never"
    started = time.monotonic()
    await client.BatchV1Api(api).create_namespaced_job(ns, body={
        "metadata": {"name": "sweep"}, "spec": {"backoffLimit": 0, "template": template}})
    batch = client.BatchV1Api(api)

    async def complete() -> bool:
        job = await batch.read_namespaced_job("sweep", ns)
        return any(c.type == "Complete" and c.status == "True"
                   for c in job.status.conditions or [])

    await eventually(complete, "the Job Complete", within=30)
    # Not before its run time: the pod ran, then succeeded.
    assert time.monotonic() - started >= 2
    (job_pod,) = (await client.CoreV1Api(api).list_namespaced_pod(
        ns, label_selector="batch.kubernetes.io/job-name=sweep")).items
    assert job_pod.status.phase == "Succeeded"
    assert job_pod.status.container_statuses[0].state.terminated.reason == "Completed"


async def test_a_job_without_a_run_time_keeps_running(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    pool, _ = gpu_pool
    ns = await namespaces(IGNORED)
    template = pool_template(pool, 1)
    template["spec"]["restartPolicy"] = "Never"
    await client.BatchV1Api(api).create_namespaced_job(ns, body={
        "metadata": {"name": "long"}, "spec": {"template": template}})
    core = client.CoreV1Api(api)

    async def running() -> bool:
        pods = (await core.list_namespaced_pod(
            ns, label_selector="batch.kubernetes.io/job-name=long")).items
        return len(pods) == 1 and pods[0].status.phase == "Running"

    await eventually(running, "the Job's pod Running")
    await asyncio.sleep(3)
    (job_pod,) = (await core.list_namespaced_pod(
        ns, label_selector="batch.kubernetes.io/job-name=long")).items
    assert job_pod.status.phase == "Running"


async def test_a_preempted_pod_goes_away_and_the_preemptor_lands(
        api: client.ApiClient, namespaces: NamespaceFactory, gpu_pool: NodePool) -> None:
    """kube-scheduler deletes the victim gracefully; KWOK finishes the deletion as a
    kubelet would, so the preemptor binds in its place and runs."""
    pool, _ = gpu_pool
    ns = await namespaces(IGNORED)
    low, high = f"e2e-low-{uuid.uuid4().hex[:6]}", f"e2e-high-{uuid.uuid4().hex[:6]}"
    await wiring.apply_priority_classes(api, [(low, 10, "PreemptLowerPriority"),
                                              (high, 1000, "PreemptLowerPriority")])
    core = client.CoreV1Api(api)
    try:
        for i in range(2):  # both nodes full
            victim = pool_pod(f"low-{i}", ns, pool, 8)
            victim["spec"]["priorityClassName"] = low
            await core.create_namespaced_pod(ns, body=victim)

        async def both_running() -> bool:
            phases = [(await stored_pod(api, ns, f"low-{i}"))["status"].get("phase")
                      for i in range(2)]
            return phases == ["Running", "Running"]

        await eventually(both_running, "the two low-priority pods Running")
        preemptor = pool_pod("high", ns, pool, 8)
        preemptor["spec"]["priorityClassName"] = high
        await core.create_namespaced_pod(ns, body=preemptor)

        async def landed() -> bool:
            phase: str | None = (await stored_pod(api, ns, "high"))["status"].get("phase")
            return phase == "Running"

        await eventually(landed, "the preemptor bound and Running")
        left = [p.metadata.name for p in (await core.list_namespaced_pod(ns)).items]
        assert sorted(left) in (["high", "low-0"], ["high", "low-1"]), left
    finally:
        for name in (low, high):
            await client.SchedulingV1Api(api).delete_priority_class(name)


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


# --- what users create, through Airlock's webhook -----------------------------------

GPU_POD = """
apiVersion: v1
kind: Pod
metadata: {{name: infer, namespace: {ns}}}
spec:
  containers:
    - name: vllm
      image: vllm/vllm-openai:v0.6.3
      resources: {{limits: {{nvidia.com/gpu: "1"}}}}
"""


@pytest.mark.usefixtures("airlock")
async def test_a_namespace_made_with_kubectl_just_works(
        binaries: Binaries, control_plane: ControlPlane, api: client.ApiClient) -> None:
    """What a newcomer types: create a namespace, apply a pod. The pod is admitted (and
    classified by Airlock) with the ServiceAccount kube-controller-manager made."""
    ns, config = f"team-{uuid.uuid4().hex[:6]}", control_plane.admin_kubeconfig
    kubectl(binaries.kubectl, "create", "namespace", ns, kubeconfig=config)
    try:
        # Typed by hand there are seconds in between; the controller takes milliseconds.
        kubectl(binaries.kubectl, "wait", "--for=create", "--timeout=10s", "-n", ns,
                "serviceaccount/default", kubeconfig=config)
        kubectl(binaries.kubectl, "apply", "-f", "-", kubeconfig=config,
                stdin=GPU_POD.format(ns=ns))
        stored = await stored_pod(api, ns, "infer")
        assert stored["spec"]["serviceAccountName"] == "default"
        assert stored["spec"]["priorityClassName"] == "airlock-inference"
    finally:
        kubectl(binaries.kubectl, "delete", "namespace", ns, "--wait=false",
                kubeconfig=config)


@pytest.mark.usefixtures("airlock")
async def test_a_deployments_pods_come_from_the_replicaset_controller_through_airlock(
        api: client.ApiClient, namespaces: NamespaceFactory) -> None:
    ns = await namespaces()
    await client.AppsV1Api(api).create_namespaced_deployment(ns, body={
        "metadata": {"name": "vllm"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "vllm"}},
                 "template": {"metadata": {"labels": {"app": "vllm"}}, "spec": {
                     "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.6.3",
                                     "resources": {"limits": {GPU: "1"}}}]}}}})
    apps = client.AppsV1Api(api)

    async def available() -> bool:
        status = (await apps.read_namespaced_deployment("vllm", ns)).status
        return bool(status.ready_replicas == 2 and status.available_replicas == 2)

    await eventually(available, "the Deployment's 2 replicas Ready", within=40)
    pods = (await client.CoreV1Api(api).list_namespaced_pod(ns)).items
    assert len(pods) == 2
    for p in pods:
        (owner,) = p.metadata.owner_references
        assert owner.kind == "ReplicaSet"
        assert owner.name.startswith("vllm-")
        # Airlock's webhook classified and mutated what the ReplicaSet controller made.
        assert p.metadata.labels["gpu-airlock.io/class"] == "inference"
        assert p.spec.priority_class_name == "airlock-inference"
        assert p.status.phase == "Running"


# --- teardown -------------------------------------------------------------------------

def test_stop_leaves_no_process_or_directory(binaries: Binaries) -> None:
    with ControlPlane(binaries) as plane:
        pids = [c.process.pid for c in plane.components]
        workdir = plane.workdir
        print(f"second control plane started in {plane.start_seconds:.1f}s")
        assert len(pids) == 5
        assert all(alive(p) for p in pids)
        assert [c.name for c in plane.components] == [
            "etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager", "kwok"]
    assert not any(alive(p) for p in pids)
    assert not workdir.exists()


OWNER = """
import json, sys
from pathlib import Path
from webhook.sandbox.binaries import KUBERNETES_VERSION, Binaries
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.processes import Webhook
plane = ControlPlane(Binaries(*map(Path, sys.argv[1:]))).start()
print(json.dumps({"pids": [c.process.pid for c in plane.components],
                  "workdir": str(plane.workdir)}), flush=True)
sys.stdin.read()
"""


@pytest.mark.skipif(SETPRIV is None and os.environ.get("CI") != "true",
                    reason="setpriv (util-linux) is not installed")
def test_a_killed_test_run_takes_its_control_plane_with_it(binaries: Binaries) -> None:
    """SIGKILL (a CI timeout, an OOM kill) runs no atexit and no fixture teardown."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, *map(str, dataclasses.astuple(binaries))],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        cwd=ROOT)
    assert owner.stdout is not None
    started = json.loads(owner.stdout.readline())
    pids: list[int] = started["pids"]
    try:
        assert len(pids) == 5
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
