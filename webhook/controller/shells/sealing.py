"""The key the controller seals its records with (`records.Seal`): one Secret in
Airlock's namespace, made by the first controller that finds none, read by every replica
at start-up. Only the controller's ServiceAccount may read it (deploy/base's RBAC), so
nobody else can write a record the controller will act on."""

from __future__ import annotations

import base64
import datetime
import logging
import secrets
import time

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.records import Seal
from webhook.controller.shells.patience import patiently
from webhook.kuberaw import json_of

log = logging.getLogger("airlock.controller")

SECRET = "airlock-record-key"
FIELD = "key"
KEY_BYTES = 32


async def _read(core: client.CoreV1Api, namespace: str) -> Seal:
    found = await json_of(await core.read_namespaced_secret(SECRET, namespace,
                                                            _preload_content=False))
    key = base64.b64decode((found.get("data") or {}).get(FIELD) or "")
    made = (found.get("metadata") or {}).get("creationTimestamp") or ""
    since = datetime.datetime.fromisoformat(made.replace("Z", "+00:00")).timestamp()
    return Seal(key, since, time.time)


async def _make(core: client.CoreV1Api, namespace: str) -> None:
    body = {"metadata": {"name": SECRET, "labels": {"app.kubernetes.io/part-of": "airlock"}},
            "type": "Opaque",
            "data": {FIELD: base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()}}
    try:
        await json_of(await core.create_namespaced_secret(namespace, body=body,
                                                          _preload_content=False))
        log.info("made the record key", extra={"secret": f"{namespace}/{SECRET}"})
    except ApiException as e:
        if e.status != 409:
            raise


async def load_seal(core: client.CoreV1Api, namespace: str, within: float = 60.0) -> Seal:
    """The record key, made now if there is none. Replicas starting together may both
    make one: the apiserver keeps the first, and the other reads it back. A restarting
    apiserver's passing answers are asked again for `within` seconds (`patiently`)."""
    what = f"secret {namespace}/{SECRET}"
    try:
        return await patiently(lambda: _read(core, namespace), what, within=within)
    except ApiException as e:
        if e.status != 404:
            raise
    await patiently(lambda: _make(core, namespace), what, within=within)
    return await patiently(lambda: _read(core, namespace), what, within=within)
