"""What the leader keeps in the cluster, so a restart or a new leader carries on from it
instead of from zero: the fair-share usage, since when running gangs have been short of
members, and the run times learned for backfill (`accounting.Accounts.memory` says what, by
key). One ConfigMap,
`airlock-fair-share` in Airlock's namespace, written by the leader every sampling
interval and as soon as a gang falls short, read when it starts leading."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import aiohttp
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.shells.leading import Fence
from webhook.controller.shells.patience import patiently
from webhook.kuberaw import json_of

log = logging.getLogger("airlock.controller")

NAME = "airlock-fair-share"


async def recall(core: client.CoreV1Api, namespace: str, within: float = 60.0
                 ) -> dict[str, str]:
    """What a former leader kept, by key, as it wrote it; nothing when there is none. A
    restarting apiserver's passing answers are asked again for `within` seconds: taken
    for "nothing", they would have this leader start the fair share from zero, and keep
    that over what the last one kept."""
    async def read() -> dict[str, Any]:
        return await json_of(await core.read_namespaced_config_map(
            NAME, namespace, _preload_content=False))

    try:
        found = await patiently(read, f"configmap {namespace}/{NAME}", within=within)
    except (ApiException, aiohttp.ClientError, OSError) as e:
        if not isinstance(e, ApiException) or e.status != 404:
            log.warning("what the last leader kept is not readable; starting from zero",
                        extra={"error": str(e).splitlines()[0]})
        return {}
    return {str(k): str(v) for k, v in (found.get("data") or {}).items()}


async def store(core: client.CoreV1Api, namespace: str, data: Mapping[str, str],
                fence: Fence) -> None:
    body = {"data": dict(data)}
    try:
        fence.check()
        try:
            await json_of(await core.patch_namespaced_config_map(
                NAME, namespace, body=body, _preload_content=False))
        except ApiException as e:
            if e.status != 404:
                raise
            fence.check()
            await json_of(await core.create_namespaced_config_map(
                namespace, body={"metadata": {"name": NAME}, **body},
                _preload_content=False))
    except ApiException as e:
        log.warning("fair share, short gangs and run times not kept; trying again at the "
                    "next sample",
                    extra={"status": e.status})
