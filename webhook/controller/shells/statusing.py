"""`airlock status`: list the cluster once (kubeconfig or in-cluster), read the policy,
print `reporting`'s report. `kubectl airlock` (webhook/plugin) surveys the same way."""

from __future__ import annotations

import asyncio
import functools
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.records import Unverified
from webhook.controller.core.reporting import Report, report
from webhook.controller.shells.cache import Cache
from webhook.controller.shells.remembering import recall
from webhook.controller.shells.running import connect
from webhook.devices.claims import ClaimKind
from webhook.keys import SYSTEM_NAMESPACE
from webhook.kuberaw import json_of
from webhook.operators.clusterautoscaler import keys as provisioning_api
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy


async def _items(call: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = await json_of(await call(limit=500, _preload_content=False,
                                        **({"_continue": token} if token else {}), **kwargs))
        items += page.get("items") or []
        token = page["metadata"].get("continue")
        if not token:
            return items


async def _devices(api: client.ApiClient) -> tuple[list[dict[str, Any]], ...]:
    """ResourceSlices, ResourceClaimTemplates and ResourceClaims; none where the apiserver
    serves no resource.k8s.io/v1."""
    resource = client.ResourceV1Api(api)
    try:
        return tuple(await asyncio.gather(
            _items(resource.list_resource_slice),
            _items(resource.list_resource_claim_template_for_all_namespaces),
            _items(resource.list_resource_claim_for_all_namespaces)))
    except ApiException as e:
        if e.status != 404:
            raise
        return [], [], []


async def _requests(api: client.ApiClient) -> list[dict[str, Any]]:
    """The ProvisioningRequests there are; none where the apiserver serves none."""
    try:
        return await _items(functools.partial(
            client.CustomObjectsApi(api).list_cluster_custom_object,
            provisioning_api.GROUP, provisioning_api.VERSION, provisioning_api.PLURAL))
    except ApiException as e:
        if e.status == 404:
            return []
        raise


@dataclass(frozen=True, slots=True)
class Survey:
    """The cluster as listed once, and what `airlock status` reports of it."""

    report: Report
    cluster: Tracked


async def survey(api: client.ApiClient, policy: Policy, patience: float = 60.0) -> Survey:
    """List the cluster once and report on it as the controller would decide now.
    `patience`: how long to ask again for what the leader kept, while it is unreadable."""
    cache = Cache(policy.counted(), Unverified(), policy.device_kinds)
    core = client.CoreV1Api(api)
    pods, nodes, events, kept, devices, requests = await asyncio.gather(
        _items(core.list_pod_for_all_namespaces), _items(core.list_node),
        _items(core.list_event_for_all_namespaces, field_selector="reason=Preempting"),
        recall(core, SYSTEM_NAMESPACE, within=patience), _devices(api), _requests(api))
    # The controller's own way in: DRA devices first, so pods' claims count at once.
    slices, templates, claims = devices
    cache.list_nodes([NodeInfo.parse(n) for n in nodes])
    cache.count_devices_as(policy.device_kinds, policy.gpu_models)
    cache.list_slices([cache.parse_slice(s) for s in slices])
    pairs: tuple[tuple[ClaimKind, list[dict[str, Any]]], ...] = (
        ("ResourceClaimTemplate", templates), ("ResourceClaim", claims))
    for kind, listed in pairs:
        cache.list_claims(kind)(list(map(cache.parse_claim(kind), listed)))
    cache.list_pods([cache.parse_pod(p) for p in pods])
    cache.list_requests([cache.parse_request(r) for r in requests])
    found = report(policy, cache.cluster, events, time.time(), kept,
                   cache.placeholders.values(), cache.requests.values())
    return Survey(found, cache.cluster)


def show(found: Report, output: str) -> None:
    """The report as `airlock status` prints it: its table, or `-o json`."""
    if output == "json":
        print(json.dumps(found.as_json(), indent=2))
    else:
        print(found.text(), end="")


async def _status(kubeconfig: Path | None, policies: Path, output: str) -> int:
    try:
        policy = load_policy(policies)
    except PolicyError as e:
        print(f"airlock status: the policy in {policies} is not valid:\n{e}", file=sys.stderr)
        return 1
    async with await connect(kubeconfig) as api:
        found = await survey(api, policy)
    show(found.report, output)
    return 0


def run_status(kubeconfig: Path | None, policies: Path, output: str) -> int:
    return asyncio.run(_status(kubeconfig, policies, output))
