"""The fair-share usage kept in the cluster, so a restart or a new leader carries on from
it instead of from zero: the ConfigMap `airlock-fair-share` in Airlock's namespace,
written by the leader every sampling interval, read when it starts leading."""

from __future__ import annotations

import logging

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.fairsharing import FairShare
from webhook.controller.leading import Fence
from webhook.controller.raw import json_of

log = logging.getLogger("airlock.controller")

NAME = "airlock-fair-share"
KEY = "fairShare"


async def recall(core: client.CoreV1Api, namespace: str) -> str | None:
    """The usage a former leader kept, as it wrote it; None when there is none."""
    try:
        found = await json_of(await core.read_namespaced_config_map(
            NAME, namespace, _preload_content=False))
    except ApiException as e:
        if e.status != 404:
            log.warning("fair share not read; starting from zero", extra={"status": e.status})
        return None
    text: str | None = (found.get("data") or {}).get(KEY)
    return text


async def keep(core: client.CoreV1Api, namespace: str, fair: FairShare, fence: Fence) -> None:
    body = {"data": {KEY: fair.dumps()}}
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
        log.warning("fair share not kept; trying again at the next sample",
                    extra={"status": e.status})
