"""Airlock wired into a control plane: its webhook configurations (the very file
deploy/ installs, pointed at a loopback URL), PriorityClasses and namespaces."""

from __future__ import annotations

import asyncio
import base64
import copy
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.keys import (
    PLACEHOLDER_PRIORITY,
    PLACEHOLDER_PRIORITY_CLASS,
    POLICY_CONFIGMAP,
    SYSTEM_NAMESPACE,
)
from webhook.policy.loading import policy_files
from webhook.policy.model import Policy
from webhook.sandbox.pki import write_kubeconfig

WEBHOOK_CONFIGURATIONS = (Path(__file__).resolve().parents[2] / "deploy" / "base"
                          / "webhook-configurations.yaml")


def point_at(doc: dict[str, Any], url: str, ca_pem: bytes) -> None:
    """Swap each webhook's Service in a configuration for `url` (a loopback server),
    trusting `ca_pem`: how the sandbox serves every webhook, Airlock's and operators'."""
    for hook in doc["webhooks"]:
        path = hook["clientConfig"]["service"].get("path", "/")
        hook["clientConfig"] = {"url": f"{url}{path}",
                                "caBundle": base64.b64encode(ca_pem).decode()}


def webhook_configurations(url: str, ca_pem: bytes,
                           source: Path = WEBHOOK_CONFIGURATIONS) -> list[dict[str, Any]]:
    """The configurations of `source` with each webhook's Service swapped for `url`."""
    docs = [d for d in yaml.safe_load_all(source.read_text()) if d]
    out = []
    for doc in docs:
        doc = copy.deepcopy(doc)
        doc["metadata"].pop("annotations", None)  # cert-manager's CA injection
        point_at(doc, url, ca_pem)
        out.append(doc)
    return out


async def apply_webhook_configurations(api: client.ApiClient,
                                       docs: list[dict[str, Any]]) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    for doc in docs:
        name = doc["metadata"]["name"]
        if doc["kind"] == "MutatingWebhookConfiguration":
            create, delete = (admission.create_mutating_webhook_configuration,
                              admission.delete_mutating_webhook_configuration)
        else:
            create, delete = (admission.create_validating_webhook_configuration,
                              admission.delete_validating_webhook_configuration)
        try:
            await delete(name)
        except ApiException as e:
            if e.status != 404:
                raise
        await create(body=doc)


PriorityClassValues = tuple[str, int, str]  # name, value, preemptionPolicy


def priority_class(name: str, value: int, preemption_policy: str = "PreemptLowerPriority",
                   description: str = "") -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "airlock"}},
        "value": value, "preemptionPolicy": preemption_policy, "description": description,
    }


def priority_classes(policy: Policy) -> list[dict[str, Any]]:
    """The classes' PriorityClasses, and the capacity requests' placeholders' (as
    deploy/base/priorityclasses.yaml installs them)."""
    return [*(priority_class(spec.priority_class.name, spec.priority_class.value,
                             spec.priority_class.preemption_policy, f"Airlock class {name}")
              for name, spec in policy.classes.items()),
            priority_class(PLACEHOLDER_PRIORITY_CLASS, PLACEHOLDER_PRIORITY, "Never",
                           "Airlock's placeholders: room asked of an autoscaler")]


async def apply_priority_classes(api: client.ApiClient,
                                 classes: Iterable[dict[str, Any] | PriorityClassValues]
                                 ) -> None:
    """Create PriorityClasses (manifests or (name, value, preemptionPolicy) tuples); one
    that exists already is left as it is (its value is immutable anyway)."""
    scheduling = client.SchedulingV1Api(api)
    for pc in classes:
        body = priority_class(*pc) if isinstance(pc, tuple) else pc
        try:
            await scheduling.create_priority_class(body=body)
        except ApiException as e:
            if e.status != 409:
                raise


async def create_priority_classes(api: client.ApiClient, policy: Policy) -> None:
    await apply_priority_classes(api, priority_classes(policy))


async def publish_policy(api: client.ApiClient, policies: Path) -> None:
    """The policy files the sandbox runs in the ConfigMap an installed Airlock mounts
    them from (made, or replaced), so `kubectl airlock` reads them as on any cluster."""
    await create_namespace(api, SYSTEM_NAMESPACE)
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": POLICY_CONFIGMAP},
            "data": {f.name: f.read_text() for f in policy_files(policies)}}
    await create_or_replace(
        lambda: core.create_namespaced_config_map(SYSTEM_NAMESPACE, body=body),
        lambda: core.replace_namespaced_config_map(POLICY_CONFIGMAP, SYSTEM_NAMESPACE,
                                                   body=body))


async def create_or_replace(create: Callable[[], Awaitable[Any]],
                            replace: Callable[[], Awaitable[Any]]) -> None:
    """Create an object; where one of its name is there, replace it."""
    try:
        await create()
    except ApiException as e:
        if e.status != 409:
            raise
        await replace()


async def create_namespace(api: client.ApiClient, name: str,
                           labels: dict[str, str] | None = None,
                           within: float = 30.0, pods: bool = True) -> None:
    """A namespace, returned once kube-controller-manager has made its `default`
    ServiceAccount: the ServiceAccount admission plugin refuses pods until then, so a
    pod created right after would race it. Without `pods` (none will be created in it
    here), returned once it exists."""
    core = client.CoreV1Api(api)
    try:
        await core.create_namespace(body={"metadata": {"name": name, "labels": labels or {}}})
    except ApiException as e:
        if e.status != 409:
            raise
    if not pods:
        return
    deadline = time.monotonic() + within
    while True:
        try:
            await core.read_namespaced_service_account("default", name)
            return
        except ApiException as e:
            if e.status != 404 or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.05)


CONTROLLER_RBAC = WEBHOOK_CONFIGURATIONS.parent / "controller-rbac.yaml"
# What the webhook reads: DRA claims and claim templates.
WEBHOOK_RBAC = WEBHOOK_CONFIGURATIONS.parent / "webhook-rbac.yaml"
# Both components may review who scrapes their /metrics; the reader role for scrapers.
METRICS_RBAC = WEBHOOK_CONFIGURATIONS.parent / "metrics-rbac.yaml"


async def _create_rbac(api: client.ApiClient, doc: dict[str, Any]) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    ns, kind = doc["metadata"].get("namespace"), doc["kind"]
    try:
        if kind == "ClusterRole":
            await rbac.create_cluster_role(body=doc)
        elif kind == "ClusterRoleBinding":
            await rbac.create_cluster_role_binding(body=doc)
        elif kind == "Role":
            await rbac.create_namespaced_role(ns, body=doc)
        else:
            await rbac.create_namespaced_role_binding(ns, body=doc)
    except ApiException as e:
        if e.status != 409:
            raise


async def apply_rbac(api: client.ApiClient, source: Path) -> None:
    """Create each RBAC object of a deploy/ file (one that exists is left as it is), all
    at once: a binding may name a role not yet there."""
    await asyncio.gather(*(_create_rbac(api, doc)
                           for doc in yaml.safe_load_all(source.read_text()) if doc))


async def account_kubeconfig(api: client.ApiClient, server: str, ca_file: Path, path: Path,
                             account: str) -> Path:
    """A kubeconfig for Airlock's ServiceAccount `account` (airlock-controller or
    airlock-webhook), with exactly the RBAC that deploy/ grants Airlock: the sandbox and
    the tests run each component as it runs in a cluster."""
    # Not waiting on kube-controller-manager, which may still be starting: no pod of
    # Airlock's runs in the namespace here.
    await create_namespace(api, "airlock-system", pods=False)
    try:
        await client.CoreV1Api(api).create_namespaced_service_account(
            "airlock-system", body={"metadata": {"name": account}})
    except ApiException as e:
        if e.status != 409:
            raise
    await asyncio.gather(*(apply_rbac(api, source)
                           for source in (CONTROLLER_RBAC, WEBHOOK_RBAC, METRICS_RBAC)))
    token = await client.CoreV1Api(api).create_namespaced_service_account_token(
        account, "airlock-system", body={"spec": {"expirationSeconds": 86400}})
    return write_kubeconfig(path, server, ca_file.read_bytes(), account,
                            token=token.status.token)


async def controller_kubeconfig(api: client.ApiClient, server: str, ca_file: Path,
                                path: Path) -> Path:
    """A kubeconfig for the controller's own ServiceAccount (`account_kubeconfig`)."""
    return await account_kubeconfig(api, server, ca_file, path, "airlock-controller")


ADMISSION_POLICIES = WEBHOOK_CONFIGURATIONS.parent / "admission-policies.yaml"


async def apply_admission_policies(api: client.ApiClient,
                                   source: Path = ADMISSION_POLICIES) -> None:
    """The ValidatingAdmissionPolicies deploy/ installs, with their bindings and the
    ClusterRole they name: replaced, so an edited file takes effect; back once the
    apiserver enforces them (it takes them up from a watch, a moment after they are
    stored)."""
    admission = client.AdmissionregistrationV1Api(api)
    kinds = {
        "ValidatingAdmissionPolicy": (admission.create_validating_admission_policy,
                                      admission.delete_validating_admission_policy),
        "ValidatingAdmissionPolicyBinding": (
            admission.create_validating_admission_policy_binding,
            admission.delete_validating_admission_policy_binding),
    }
    for doc in yaml.safe_load_all(source.read_text()):
        if not doc:
            continue
        if doc["kind"] not in kinds:
            await _create_rbac(api, doc)
            continue
        create, delete = kinds[doc["kind"]]
        try:
            await delete(doc["metadata"]["name"])
        except ApiException as e:
            if e.status != 404:
                raise
        await create(body=doc)
    await _enforced(api)


async def _enforced(api: client.ApiClient, within: float = 30.0) -> None:
    """Until the apiserver refuses what the policies refuse: a pod created (dry run) in
    Airlock's own namespace, which no webhook of Airlock's sees, with a controller record."""
    probe = {"metadata": {"name": "airlock-policy-probe", "annotations": {
                 "gpu-airlock.io/placement": "{}"}},
             "spec": {"containers": [{"name": "probe", "image": "probe"}]}}
    await create_namespace(api, SYSTEM_NAMESPACE)
    deadline = time.monotonic() + within
    while True:
        try:
            await client.CoreV1Api(api).create_namespaced_pod(SYSTEM_NAMESPACE, body=probe,
                                                              dry_run="All")
        except ApiException as e:
            if e.status == 403 and "airlock-marks" in str(e.body):
                return
            raise
        if time.monotonic() > deadline:
            raise RuntimeError("the apiserver does not enforce Airlock's admission policies "
                               f"{within:g}s after they were created")
        await asyncio.sleep(0.2)
