"""The controller's watches, each feeding the cache (or the accounts, for
PodDisruptionBudgets): pods, nodes and budgets always; DRA claims, templates and slices,
and ProvisioningRequests, only where the apiserver serves them."""

from __future__ import annotations

import asyncio
import functools
import gc
import logging
from collections.abc import Awaitable, Callable

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.health import Health
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.preemption.budgets import Pdb
from webhook.controller.core.queues.accounting import Accounts
from webhook.controller.shells.cache import Cache
from webhook.controller.shells.patience import patiently
from webhook.devices.claims import ClaimKind
from webhook.kubewatch import Lister, watch
from webhook.operators.clusterautoscaler import keys as provisioning_api

log = logging.getLogger("airlock.controller")


class Watches:
    def __init__(self, api: client.ApiClient, cache: Cache, accounts: Accounts,
                 health: Health) -> None:
        self.api = api
        self.cache = cache
        self.accounts = accounts
        self.health = health
        self.synced = asyncio.Event()
        self._slices: asyncio.Task[None] | None = None

    async def run(self) -> None:
        core = client.CoreV1Api(self.api)
        pods_ready, nodes_ready = asyncio.Event(), asyncio.Event()
        tasks = [
            asyncio.create_task(watch("pods", core.list_pod_for_all_namespaces,
                                      self.cache.parse_pod, self.cache.list_pods,
                                      self.cache.pod_event, pods_ready,
                                      alive=self.health.watching("pods"))),
            asyncio.create_task(watch("nodes", core.list_node, NodeInfo.parse,
                                      self.cache.list_nodes, self.cache.node_event,
                                      nodes_ready, alive=self.health.watching("nodes"))),
            asyncio.create_task(watch(
                "poddisruptionbudgets",
                client.PolicyV1Api(self.api).list_pod_disruption_budget_for_all_namespaces,
                Pdb.parse, self.accounts.list_pdbs, self.accounts.pdb_event,
                alive=self.health.watching("poddisruptionbudgets"))),
        ]
        tasks.extend(await self._devices())
        tasks.extend(await self._requests())
        await pods_ready.wait()
        await nodes_ready.wait()
        # What the first listing brought (tens of thousands of pod views in a large
        # cluster) lives long and holds no cycles: left to the cyclic collector, every
        # full collection walks all of it, which took a third of a round at 50,000 pods.
        gc.collect()
        gc.freeze()
        self.synced.set()
        await asyncio.gather(*tasks)

    def relist_slices(self) -> None:
        """What a slice offers is counted as it arrives: by new kinds, list them again."""
        if self._slices:
            self._slices.cancel()
            self._slices = self._watch_slices()

    async def _devices(self) -> list[asyncio.Task[None]]:
        """The DRA watches, once their lists are in: claims and templates (what pods ask
        for) and slices (what nodes offer). None where the apiserver serves no
        resource.k8s.io/v1 (before Kubernetes 1.34, or DRA off)."""
        resource = client.ResourceV1Api(self.api)
        if not await _served(functools.partial(resource.list_resource_slice, limit=1),
                             "resourceslices"):
            log.info("the apiserver serves no resource.k8s.io/v1: no DRA devices to count")
            return []
        cache, tasks = self.cache, []
        claims: tuple[tuple[ClaimKind, Lister], ...] = (
            ("ResourceClaimTemplate", resource.list_resource_claim_template_for_all_namespaces),
            ("ResourceClaim", resource.list_resource_claim_for_all_namespaces))
        for kind, lister in claims:
            ready = asyncio.Event()
            tasks.append((asyncio.create_task(watch(
                kind, lister, cache.parse_claim(kind), cache.list_claims(kind),
                cache.claim_event(kind), ready, alive=self.health.watching(kind))), ready))
        slices_ready = asyncio.Event()
        self._slices = self._watch_slices(slices_ready)
        for _, ready in [*tasks, (self._slices, slices_ready)]:
            await ready.wait()
        return [task for task, _ in tasks]

    async def _requests(self) -> list[asyncio.Task[None]]:
        """The ProvisioningRequests the controller made, where the apiserver serves
        them (the cluster-autoscaler's CRD installed); none elsewhere."""
        lister = functools.partial(client.CustomObjectsApi(self.api).list_cluster_custom_object,
                                   provisioning_api.GROUP, provisioning_api.VERSION,
                                   provisioning_api.PLURAL)
        if not await _served(functools.partial(lister, limit=1), "provisioningrequests"):
            log.info("the apiserver serves no ProvisioningRequests: capacity requests "
                     "are made with placeholders only")
            return []
        ready = asyncio.Event()
        task = asyncio.create_task(watch(
            "provisioningrequests", lister, self.cache.parse_request,
            self.cache.list_requests, self.cache.request_event, ready,
            alive=self.health.watching("provisioningrequests")))
        await ready.wait()
        return [task]

    def _watch_slices(self, ready: asyncio.Event | None = None) -> asyncio.Task[None]:
        return asyncio.create_task(watch(
            "resourceslices", client.ResourceV1Api(self.api).list_resource_slice,
            self.cache.parse_slice, self.cache.list_slices, self.cache.slice_event, ready,
            alive=self.health.watching("resourceslices")))


async def _served(probe: Callable[[], Awaitable[object]], what: str) -> bool:
    """Whether the apiserver serves `what`: a list answers, or a 404 says it does not."""
    try:
        await patiently(probe, what)
    except ApiException as e:
        if e.status == 404:
            return False
        raise
    return True
