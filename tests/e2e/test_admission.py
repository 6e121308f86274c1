"""Admission through a real kube-apiserver: what is stored is what the apiserver made of
our patch, after its own Priority plugin, validation and RBAC."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import pod
from webhook.keys import (
    CLASS_LABEL,
    CONTROLLER_IDENTITY,
    GANG_NAME_LABEL,
    GATE,
    QUEUED_ANNOTATION,
)
from webhook.kuberaw import json_of
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig, from_token, service_account_token
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import free_port
from webhook.sandbox.nodes import CLIQUE_LABEL
from webhook.sandbox.processes import Webhook

pytestmark = pytest.mark.usefixtures("airlock")


async def create(api: client.ApiClient, ns: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The pod as stored: the create response, which is read before the garbage collector
    can remove a pod whose owner (as in these tests) does not exist."""
    obj["metadata"]["namespace"] = ns
    return await json_of(await client.CoreV1Api(api).create_namespaced_pod(
        ns, body=obj, _preload_content=False))


async def read(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    response = await client.CoreV1Api(api).read_namespaced_pod(
        name, ns, _preload_content=False)
    stored: dict[str, Any] = await response.json()
    return stored


def kubeflow_worker(name: str = "llama-worker-0") -> dict[str, Any]:
    return (pod(name).gpus(8).label("training.kubeflow.org/job-name", "llama")
            .label("training.kubeflow.org/replica-type", "worker").build())


async def test_stored_pod_has_class_priority_and_numeric_priority(
        api: client.ApiClient, namespace: str) -> None:
    stored = await create(api, namespace, kubeflow_worker())
    spec = stored["spec"]
    assert spec["priorityClassName"] == "airlock-training"
    # The Priority plugin ran before the webhook; it ran again on the patched pod, so the
    # stored number is the new class's, not the default 0.
    assert spec["priority"] == 50000
    assert spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert {"name": GATE} in spec["schedulingGates"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} \
        in spec["tolerations"]
    affinity = spec["affinity"]["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert affinity[0]["podAffinityTerm"]["topologyKey"] == CLIQUE_LABEL
    assert stored["metadata"]["labels"][CLASS_LABEL] == "training"
    assert stored["status"]["phase"] == "Pending"


async def test_scavenger_never_preempts_and_waits_in_its_queue(
        api: client.ApiClient, namespace: str) -> None:
    stored = await create(api, namespace, pod("sweep-1").gpus(1).owner("Job", "sweep").build())
    assert stored["spec"]["priorityClassName"] == "airlock-scavenger"
    assert stored["spec"]["priority"] == 1000
    assert stored["spec"]["preemptionPolicy"] == "Never"
    # A single pod of a class that queues: gated, and marked for the controller.
    assert stored["spec"]["schedulingGates"] == [{"name": GATE}]
    assert stored["metadata"]["annotations"][QUEUED_ANNOTATION] == "true"


async def test_a_pod_that_names_its_node_is_not_gated(api: client.ApiClient,
                                                      namespace: str) -> None:
    # The apiserver rejects a gated pod that names its node: Airlock must not gate it.
    stored = await create(api, namespace, pod("pinned").gpus(1).owner("Job", "sweep")
                          .set("nodeName", "gpu-0000").build())
    assert stored["spec"]["priorityClassName"] == "airlock-scavenger"
    assert "schedulingGates" not in stored["spec"]
    assert QUEUED_ANNOTATION not in stored["metadata"]["annotations"]


async def test_inference_pod_is_spread_and_prioritised(api: client.ApiClient,
                                                       namespace: str) -> None:
    obj = (pod("vllm-0").gpus(1).image("vllm/vllm-openai:v0.6.3")
           .owner("ReplicaSet", "vllm-5d8", "apps/v1").build())
    obj["metadata"]["ownerReferences"][0]["uid"] = "00000000-0000-4000-8000-000000000001"
    stored = await create(api, namespace, obj)
    assert stored["spec"]["priority"] == 100000
    # Inference does not queue: latency matters.
    assert "schedulingGates" not in stored["spec"]
    assert stored["spec"]["topologySpreadConstraints"][0]["topologyKey"] == \
        "kubernetes.io/hostname"


async def test_cpu_pod_passes_untouched(api: client.ApiClient, namespace: str) -> None:
    stored = await create(api, namespace, pod("web").cpu("1", "1Gi").build())
    assert "priorityClassName" not in stored["spec"] or \
        stored["spec"]["priorityClassName"] in ("", None)
    assert CLASS_LABEL not in (stored["metadata"].get("labels") or {})


@pytest.mark.parametrize(("obj", "message"), [
    (pod("bad-class").gpus(1).label(CLASS_LABEL, "vip").build(), "is not one of"),
    (pod("no-size").gpus(1).label(GANG_NAME_LABEL, "g").build(),
     "gpu-airlock.io/gang-size is missing"),
])
async def test_denials_reach_the_client_with_their_message(
        api: client.ApiClient, namespace: str, obj: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiException) as caught:
        await create(api, namespace, obj)
    assert caught.value.status in (400, 403)
    assert message in str(caught.value.body)
    assert "validate.gpu-airlock.io" in str(caught.value.body)


REMOVE_GATE = [{"op": "test", "path": "/spec/schedulingGates/0/name", "value": GATE},
               {"op": "remove", "path": "/spec/schedulingGates/0"}]


async def _grant_pod_patch(api: client.ApiClient, namespace: str, subject: dict[str, str]
                           ) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    try:
        await rbac.create_namespaced_role(namespace, body={
            "metadata": {"name": "pod-editor"},
            "rules": [{"apiGroups": [""], "resources": ["pods"],
                       "verbs": ["get", "list", "patch", "update"]}]})
    except ApiException as e:
        if e.status != 409:
            raise
    await rbac.create_namespaced_role_binding(namespace, body={
        "metadata": {"name": f"pod-editor-{subject['name'].replace(':', '-')}"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "pod-editor"},
        "subjects": [subject]})


async def test_only_the_controller_may_remove_the_gate(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane) -> None:
    await create(api, namespace, kubeflow_worker())
    core = client.CoreV1Api(api)
    # An ordinary user with every RBAC right on pods: the webhook still says no.
    await _grant_pod_patch(api, namespace, {"kind": "User", "name": "alice",
                                            "apiGroup": "rbac.authorization.k8s.io"})
    async with await from_kubeconfig(control_plane.admin_kubeconfig,
                                     impersonate="alice") as alice:
        with pytest.raises(ApiException) as caught:
            await client.CoreV1Api(alice).patch_namespaced_pod(
                "llama-worker-0", namespace, body=REMOVE_GATE,
                _content_type="application/json-patch+json")
    assert "only the Airlock controller" in str(caught.value.body)
    assert "alice" in str(caught.value.body)
    # The controller's ServiceAccount, with a real token from the TokenRequest API.
    try:
        await core.create_namespaced_service_account(
            "airlock-system", body={"metadata": {"name": "airlock-controller"}})
    except ApiException as e:
        if e.status != 409:
            raise
    await _grant_pod_patch(api, namespace, {"kind": "ServiceAccount",
                                            "name": "airlock-controller",
                                            "namespace": "airlock-system"})
    token = await service_account_token(api, "airlock-system", "airlock-controller")
    async with from_token(control_plane.url, control_plane.ca_file, token) as controller:
        review = await client.AuthenticationV1Api(controller).create_self_subject_review(
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
        assert review.status.user_info.username == CONTROLLER_IDENTITY
        await client.CoreV1Api(controller).patch_namespaced_pod(
            "llama-worker-0", namespace,
            body=[*REMOVE_GATE, {"op": "add", "path": "/spec/nodeSelector",
                                 "value": {CLIQUE_LABEL: "clique-0"}}],
            _content_type="application/json-patch+json")
    stored = await read(api, namespace, "llama-worker-0")
    assert not stored["spec"].get("schedulingGates")
    assert stored["spec"]["nodeSelector"] == {CLIQUE_LABEL: "clique-0"}


async def test_pinned_labels_cannot_change_while_gated(api: client.ApiClient,
                                                       namespace: str) -> None:
    await create(api, namespace, kubeflow_worker())
    with pytest.raises(ApiException) as caught:
        await client.CoreV1Api(api).patch_namespaced_pod(
            "llama-worker-0", namespace,
            body={"metadata": {"labels": {CLASS_LABEL: "inference"}}})
    assert "cannot change while the pod waits for its gang" in str(caught.value.body)


async def test_mutation_is_idempotent_under_reinvocation(api: client.ApiClient,
                                                         namespace: str) -> None:
    stored = await create(api, namespace, kubeflow_worker())
    assert stored["spec"]["schedulingGates"] == [{"name": GATE}]
    tolerations = [t for t in stored["spec"]["tolerations"] if t["key"] == "nvidia.com/gpu"]
    assert len(tolerations) == 1


async def test_webhook_down_fails_open_as_documented(
        api: client.ApiClient, namespace: str, airlock: Webhook) -> None:
    """failurePolicy Ignore on both webhooks (docs/operations.md): with Airlock
    unreachable, GPU pods are created unchanged and the cluster keeps working."""
    dead = f"https://127.0.0.1:{free_port()}"
    ca = airlock.certs.ca.read_bytes()
    await wiring.apply_webhook_configurations(api, wiring.webhook_configurations(dead, ca))
    try:
        stored = await create(api, namespace, kubeflow_worker("while-down"))
        assert not stored["spec"].get("schedulingGates")
        assert stored["spec"].get("priorityClassName") in (None, "")
        assert stored["spec"]["priority"] == 0
    finally:
        await wiring.apply_webhook_configurations(
            api, wiring.webhook_configurations(airlock.url, ca))
    stored = await create(api, namespace, kubeflow_worker("after-recovery"))
    assert stored["spec"]["schedulingGates"] == [{"name": GATE}]
