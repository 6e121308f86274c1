"""Trust nothing a pod says, against the real apiserver: a user who may only manage pods
in her own namespace cannot make Airlock evict anyone else's pods, lift her own gates,
pick a priority policy does not give her (inference, or Kubernetes' own, behind a gate of
her own or not), place a pod on a node herself, forge Airlock's marks on a pod its webhook
never sees, or wedge the webhook with a value no parser should take, with Airlock's
webhook up or down as far as the apiserver can hold the line; and opting a namespace out
of Airlock takes a grant."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import GPU, NOW, PodBuilder, gang_pod, pod, policy_yaml
from tests.kube import (
    Controllers,
    NamespaceFactory,
    PolicyFileFactory,
    dry_run,
    events,
    gated,
    pods_of,
    until,
)
from webhook.controller.core.records import PreemptionRecord, Record
from webhook.keys import (
    CLASS_LABEL,
    GANG_LABEL,
    GANG_NAME_LABEL,
    GATE,
    GPU_FRACTION_ANNOTATION,
    IGNORE_NAMESPACE_LABEL,
    PLACEMENT_ANNOTATION,
    PREDICTED_START_ANNOTATION,
    PREEMPTION_ANNOTATION,
)
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.processes import Webhook

MALLORY = "mallory"
# All she may do: manage pods in her own namespace (and read their events).
POD_EDITOR = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "pod-editor"},
              "rules": [{"apiGroups": [""], "resources": ["pods"],
                         "verbs": ["get", "list", "watch", "create", "update", "patch",
                                   "delete"]},
                        {"apiGroups": [""], "resources": ["events"],
                         "verbs": ["get", "list"]}]}


@pytest.fixture
async def mallory(api: client.ApiClient, namespaces: NamespaceFactory,
                  control_plane: ControlPlane) -> AsyncIterator[tuple[str, client.ApiClient]]:
    """Mallory's namespace, and a client that is Mallory (a client certificate)."""
    ns = await namespaces()
    rbac = client.RbacAuthorizationV1Api(api)
    await rbac.create_namespaced_role(ns, body=POD_EDITOR)
    await rbac.create_namespaced_role_binding(ns, body={
        "metadata": {"name": "mallory-edits-pods"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "pod-editor"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                      "name": MALLORY}]})
    async with await from_kubeconfig(control_plane.kubeconfig_for(MALLORY)) as as_mallory:
        yield ns, as_mallory


@pytest.fixture
def webhook_down(control_plane: ControlPlane, airlock: Webhook) -> Iterator[None]:
    """Airlock's webhooks unreachable for one test: the configurations point at a port
    nothing listens on, so the apiserver's calls fail and `failurePolicy: Ignore` admits
    pods as they come. Restored afterwards."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"https://127.0.0.1:{s.getsockname()[1]}"
    ca = airlock.certs.ca.read_bytes()

    async def point(url: str) -> None:
        async with await from_kubeconfig(control_plane.admin_kubeconfig) as api:
            await wiring.apply_webhook_configurations(api, wiring.webhook_configurations(url, ca))

    asyncio.run(point(dead))
    try:
        yield
    finally:
        asyncio.run(point(airlock.url))


async def _serving(api: client.ApiClient, namespaces: NamespaceFactory) -> dict[str, Any]:
    """A running vLLM pod in namespace prod, as its team deployed it."""
    prod = await namespaces()
    # Tolerating the GPU nodes' taint itself, as it would have to without Airlock.
    body = pod("vllm-0", prod).gpus(8).image("vllm/vllm-openai:v0.9").set("tolerations", [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]).build()
    await client.CoreV1Api(api).create_namespaced_pod(prod, body=body)

    async def running() -> bool:
        return bool((await pods_of(api, prod, "vllm-0"))[0]["spec"].get("nodeName"))
    await until(running)
    (serving,) = await pods_of(api, prod, "vllm-0")
    return serving


def _forged(serving: dict[str, Any], gang: str) -> dict[str, str]:
    """The records Mallory writes: the serving pod (by name and its real uid) as the
    victim of her gang, and her gang as admitted."""
    meta = serving["metadata"]
    victim = PreemptionRecord(None, None, (f"{meta['namespace']}/{meta['name']}",),
                              (serving["spec"]["nodeName"],), NOW, (meta["uid"],))
    placed = Record(None, None, (f"{gang}-0", f"{gang}-1"), NOW, 2)
    return {PREEMPTION_ANNOTATION: json.dumps({**victim.body(), "v": 1}),
            PLACEMENT_ANNOTATION: json.dumps(placed.body())}


async def _refused(call: Any) -> str:
    with pytest.raises(ApiException) as refused:
        await call
    assert refused.value.status in (400, 403, 422), refused.value
    return str(refused.value.body)


async def _still_there(api: client.ApiClient, serving: dict[str, Any]) -> None:
    meta = serving["metadata"]
    (now,) = await pods_of(api, meta["namespace"], meta["name"])
    assert now["metadata"]["uid"] == meta["uid"]
    assert not now["metadata"].get("deletionTimestamp")


async def _forgeries_move_nothing(api: client.ApiClient, mallory: tuple[str, client.ApiClient],
                                  serving: dict[str, Any]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    # Her records, and a prediction that her gang starts at once.
    records = {**_forged(serving, "m"), PREDICTED_START_ANNOTATION: "2000-01-01T00:00:00Z"}
    # On a new pod: refused.
    for key, value in records.items():
        body = gang_pod("m", 0, 2, annotations={key: value})
        said = await _refused(core.create_namespaced_pod(ns, body=body))
        assert "written only by the Airlock controller" in said
    # On an existing pod of hers, waiting behind the gate: refused too, and so is
    # touching Airlock's other marks.
    for i in range(2):
        await core.create_namespaced_pod(ns, body=gang_pod("m", i, 2, annotations={
            "gpu-airlock.io/gang-min-size": "1"}))
    for key, value in [*records.items(), (GANG_LABEL, "other")]:
        where = "labels" if key == GANG_LABEL else "annotations"
        said = await _refused(core.patch_namespaced_pod(
            "m-0", ns, body={"metadata": {where: {key: value}}}))
        assert "only the Airlock controller may change" in said, key
    await asyncio.sleep(6)  # rounds of the controller: nothing it could act on
    await _still_there(api, serving)
    # Whatever records her pods carry are the controller's own (it may admit her gang).
    for stored in await pods_of(api, ns, "m-"):
        annotations = stored["metadata"].get("annotations") or {}
        assert all(annotations.get(key) != value for key, value in records.items())


@pytest.mark.usefixtures("airlock")
async def test_forged_records_are_refused_and_move_nothing(
        api: client.ApiClient, controllers: Controllers,
        namespaces: NamespaceFactory, mallory: tuple[str, client.ApiClient]) -> None:
    controllers.start()
    serving = await _serving(api, namespaces)
    await _forgeries_move_nothing(api, mallory, serving)
    # Her gang queues like anyone's: gated by the webhook, then admitted whole.
    ns, _ = mallory
    stored = await pods_of(api, ns, "m-")
    assert all(p["metadata"]["labels"].get(GANG_LABEL) == "m" for p in stored)


@pytest.mark.usefixtures("webhook_down")
async def test_with_the_webhook_down_forged_records_still_move_nothing(
        api: client.ApiClient, controllers: Controllers, namespaces: NamespaceFactory,
        mallory: tuple[str, client.ApiClient]) -> None:
    controllers.start()
    serving = await _serving(api, namespaces)
    await _forgeries_move_nothing(api, mallory, serving)


@pytest.mark.usefixtures("airlock")
async def test_where_the_apiserver_policy_is_missing_the_controller_ignores_forgeries(
        api: client.ApiClient, controllers: Controllers,
        namespaces: NamespaceFactory, mallory: tuple[str, client.ApiClient],
        policy_file: PolicyFileFactory) -> None:
    """Defence in depth: on a cluster without Airlock's ValidatingAdmissionPolicy (say,
    removed by hand), a forged record is stored, and the controller neither evicts nor
    lifts for it, and says why on the pod."""
    ns, as_mallory = mallory
    # Her queue may use no GPU: only the forged placement could lift her gang.
    policy_file("91-no-gpus-for-mallory.yaml", policy_yaml("no-gpus-for-mallory", {
        "queues": [{"name": f"mallory-{ns}", "namespaces": [ns], "nominal": {GPU: 0},
                    "borrowingLimit": {GPU: 0}}]}))
    admission = client.AdmissionregistrationV1Api(api)
    await admission.delete_validating_admission_policy_binding("airlock-marks")
    try:
        controllers.start()
        serving = await _serving(api, namespaces)
        core = client.CoreV1Api(as_mallory)
        for i in range(2):
            await core.create_namespaced_pod(ns, body=gang_pod("m", i, 2))
        # After the webhook's marks: her gang waits behind the gate; now the forgery, once
        # the apiserver has let go of the policy.
        async def forged() -> bool:
            with contextlib.suppress(ApiException):
                await core.patch_namespaced_pod("m-0", ns, body={
                    "metadata": {"annotations": _forged(serving, "m")}})
                return True
            return False
        await until(forged, within=10)

        async def told() -> bool:
            return any(m.startswith("RecordIgnored: Airlock does not act on its "
                                    "gpu-airlock.io/placement record")
                       for m in await events(api, ns, "m-0"))
        await until(told, within=30)
        await _still_there(api, serving)
        assert all(gated(p) for p in await pods_of(api, ns, "m-"))
    finally:
        await wiring.apply_admission_policies(api)


@pytest.mark.usefixtures("airlock")
async def test_a_training_pod_cannot_pick_inference_priority_without_a_grant(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient],
        grant_inference: Callable[[str], None]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    trainer = pod("trainer-0", ns).gpus(8).label("training.kubeflow.org/job-name", "t") \
        .set("priorityClassName", "airlock-inference").build()
    await core.create_namespaced_pod(ns, body=trainer)
    (stored,) = await pods_of(api, ns, "trainer-0")
    assert stored["spec"]["priorityClassName"] == "airlock-training"
    assert stored["spec"]["priority"] == 50000
    asks = pod("asks-0", ns).gpus(8).label("training.kubeflow.org/job-name", "t") \
        .label(CLASS_LABEL, "inference").build()
    said = await _refused(core.create_namespaced_pod(ns, body=asks))
    assert "may not ask for class inference" in said
    # An explicit grant, in the policy, lets her namespace ask.
    grant_inference(ns)

    async def granted() -> bool:
        # A dry run until the webhook has the grant: a pod created while it reloads could
        # meet the old policy at /mutate and the new one at /validate.
        stored = await dry_run(as_mallory, ns, asks)
        return (stored.get("spec") or {}).get("priorityClassName") == "airlock-inference"
    await until(granted, within=20)
    await core.create_namespaced_pod(ns, body=asks)
    (stored,) = await pods_of(api, ns, "asks-0")
    assert stored["spec"]["priorityClassName"] == "airlock-inference"


@pytest.mark.usefixtures("airlock")
async def test_opting_a_namespace_out_takes_a_grant(
        api: client.ApiClient, control_plane: ControlPlane,
        namespaces: NamespaceFactory) -> None:
    ns = await namespaces()
    rbac = client.RbacAuthorizationV1Api(api)
    name = f"{ns}-labels-namespaces"
    await rbac.create_cluster_role(body={
        "metadata": {"name": name},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"],
                   "verbs": ["get", "patch", "update"]}]})
    binding: dict[str, Any] = {"metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                           "name": name},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                             "name": "tenant-admin"}]}
    await rbac.create_cluster_role_binding(body=binding)
    opt_out = {"metadata": {"labels": {IGNORE_NAMESPACE_LABEL: "true"}}}
    try:
        kubeconfig = control_plane.kubeconfig_for("tenant-admin")
        async with await from_kubeconfig(kubeconfig) as tenant:
            said = await _refused(client.CoreV1Api(tenant).patch_namespace(ns, body=opt_out))
            assert "may not set or remove the label gpu-airlock.io/ignore" in said
            await rbac.create_cluster_role_binding(body={
                **binding, "metadata": {"name": f"{name}-opt-out"},
                "roleRef": {**binding["roleRef"], "name": "airlock-namespace-opt-out"}})

            async def labelled() -> bool:
                with contextlib.suppress(ApiException):
                    await client.CoreV1Api(tenant).patch_namespace(ns, body=opt_out)
                    return True
                return False
            await until(labelled, within=10)
    finally:
        for each in (name, f"{name}-opt-out"):
            with contextlib.suppress(ApiException):
                await rbac.delete_cluster_role_binding(each)
        await rbac.delete_cluster_role(name)


REMOVE_GATES = [{"op": "remove", "path": "/spec/schedulingGates"}]
JSON_PATCH = "application/json-patch+json"
# Pods of these tests never bind: no node carries the label, so none may be preempted for
# them either, whatever their priority.
NOWHERE = {"example.com/no-such-node": "true"}


def _unplaced(name: str, ns: str) -> PodBuilder:
    return pod(name, ns).gpus(1).set("nodeSelector", NOWHERE)


@pytest.mark.usefixtures("webhook_down")
async def test_with_the_webhook_down_only_the_controller_lifts_airlocks_gate(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient],
        controller_kubeconfig: Path) -> None:
    ns, as_mallory = mallory
    # As Airlock gated it before its webhook went down.
    await client.CoreV1Api(api).create_namespaced_pod(
        ns, body=_unplaced("queued-0", ns).label(CLASS_LABEL, "scavenger").gate(GATE).build())
    said = await _refused(client.CoreV1Api(as_mallory).patch_namespaced_pod(
        "queued-0", ns, body=REMOVE_GATES, _content_type=JSON_PATCH))
    # The apiserver's own rule said it: the webhook is not there to.
    assert "ValidatingAdmissionPolicy 'airlock-marks'" in said
    assert "only the Airlock controller may remove the gpu-airlock.io/gang scheduling gate " \
           "(mallory tried)" in said
    async with await from_kubeconfig(controller_kubeconfig) as controller:
        await client.CoreV1Api(controller).patch_namespaced_pod(
            "queued-0", ns, body=REMOVE_GATES, _content_type=JSON_PATCH)
    (stored,) = await pods_of(api, ns, "queued-0")
    assert not gated(stored)


@pytest.mark.usefixtures("airlock")
async def test_a_gate_of_her_own_buys_no_priority(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    await core.create_namespaced_pod(ns, body=_unplaced("held-0", ns).gate("example.com/hold")
                                     .set("priorityClassName", "airlock-inference").build())
    (stored,) = await pods_of(api, ns, "held-0")
    # Her gate holds it, so Airlock adds none; its class's priority is the class's.
    assert stored["spec"]["schedulingGates"] == [{"name": "example.com/hold"}]
    assert (stored["spec"]["priorityClassName"], stored["spec"]["priority"]) == \
        ("airlock-scavenger", 1000)
    await core.patch_namespaced_pod("held-0", ns, body=REMOVE_GATES, _content_type=JSON_PATCH)
    (stored,) = await pods_of(api, ns, "held-0")
    assert not stored["spec"].get("schedulingGates")
    assert stored["spec"]["priority"] == 1000


def _critical_trainer(name: str, ns: str) -> dict[str, Any]:
    return _unplaced(name, ns).label("training.kubeflow.org/job-name", name) \
        .set("priorityClassName", "system-cluster-critical").build()


@pytest.mark.usefixtures("airlock")
async def test_a_tenant_training_pod_cannot_take_system_priority(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    await client.CoreV1Api(as_mallory).create_namespaced_pod(
        ns, body=_critical_trainer("critical-0", ns))
    (stored,) = await pods_of(api, ns, "critical-0")
    assert (stored["spec"]["priorityClassName"], stored["spec"]["priority"]) == \
        ("airlock-training", 50000)


# The quota docs/security.md gives tenant namespaces: no pod at Kubernetes' own priorities,
# which the apiserver enforces with or without Airlock's webhook.
PRIORITY_QUOTA = {"metadata": {"name": "airlock-no-system-priority"},
                  "spec": {"hard": {"pods": "0"}, "scopeSelector": {"matchExpressions": [
                      {"scopeName": "PriorityClass", "operator": "In",
                       "values": ["system-cluster-critical", "system-node-critical"]}]}}}


@pytest.mark.usefixtures("webhook_down")
async def test_with_the_webhook_down_a_priority_quota_still_refuses_system_priority(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    # What fails open without it: the pod is stored at the priority it names.
    await core.create_namespaced_pod(ns, body=_critical_trainer("critical-0", ns))
    (stored,) = await pods_of(api, ns, "critical-0")
    assert stored["spec"]["priority"] == 2_000_000_000
    await client.CoreV1Api(api).create_namespaced_resource_quota(ns, body=PRIORITY_QUOTA)

    async def refused() -> bool:
        try:
            await core.create_namespaced_pod(ns, body=_critical_trainer("critical-1", ns))
        except ApiException as e:
            return e.status == 403 and "airlock-no-system-priority" in str(e.body)
        await core.delete_namespaced_pod("critical-1", ns, grace_period_seconds=0)
        return False
    await until(refused, within=20)


@pytest.mark.usefixtures("airlock")
async def test_a_hostile_value_is_refused_at_once_and_the_next_pod_is_answered(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    hostile = _unplaced("fraction-0", ns).annotation(GPU_FRACTION_ANNOTATION,
                                                     "1e-200000000").build()
    said = await _refused(core.create_namespaced_pod(ns, body=hostile))
    # The webhook's own answer: had it taken the apiserver's 3 s, the pod would have been
    # stored as it came (failurePolicy: Ignore), unclassified and ungated.
    assert "validate.gpu-airlock.io" in said
    assert "gpu-airlock.io/gpu-fraction='1e-200000000' is not a number in (0, 1]" in said
    await core.create_namespaced_pod(ns, body=_unplaced("next-0", ns).build())
    (stored,) = await pods_of(api, ns, "next-0")
    assert stored["spec"]["priorityClassName"] == "airlock-scavenger"
    assert gated(stored)


@pytest.mark.usefixtures("airlock")
async def test_a_pod_the_webhook_never_sees_carries_no_mark_of_airlocks(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    core = client.CoreV1Api(as_mallory)
    busybox = pod("busybox-0", ns).image("busybox").label(GANG_LABEL, "someone-elses").build()
    said = await _refused(core.create_namespaced_pod(ns, body=busybox))
    assert "Airlock's webhook never sees this pod" in said
    # The keys users write are anyone's, on any pod.
    await core.create_namespaced_pod(
        ns, body=pod("busybox-1", ns).image("busybox").label(GANG_NAME_LABEL, "mine").build())
    assert await pods_of(api, ns, "busybox-1")


@pytest.mark.usefixtures("airlock")
async def test_a_tenant_cannot_place_a_gpu_pod_on_a_node_herself(
        api: client.ApiClient, mallory: tuple[str, client.ApiClient]) -> None:
    ns, as_mallory = mallory
    pinned = pod("pinned-0", ns).gpus(1).set("nodeName", "gpu-0000").build()
    said = await _refused(client.CoreV1Api(as_mallory).create_namespaced_pod(ns, body=pinned))
    assert "spec.nodeName 'gpu-0000' puts the pod on a node directly" in said
    assert not await pods_of(api, ns, "pinned-0")
