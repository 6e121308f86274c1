"""List-then-watch of one resource as raw JSON: resourceVersion tracking, bookmarks, a
relist on 410 Gone, and backoff on errors. Events go to a callback; nothing here decides.

What the objects say is their authors' (anyone who may create a pod, a claim or a
budget): an object the callbacks cannot take is logged and passed over, and the watch
goes on. Were it to fail the watch, the relist would meet it again, and the cache would
stop for everyone while the object exists."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.kuberaw import check, json_of

log = logging.getLogger("airlock.watch")

Lister = Callable[..., Awaitable[Any]]
Parse = Callable[[dict[str, Any]], Any]
OnList = Callable[[list[Any]], None]
OnEvent = Callable[[str, dict[str, Any]], None]


class Gone(Exception):
    pass


async def watch(kind: str, lister: Lister, parse: Parse, on_list: OnList, on_event: OnEvent,
                ready: asyncio.Event | None = None, timeout_seconds: int = 300,
                alive: Callable[[], None] | None = None,
                lost: Callable[[], None] | None = None) -> None:
    """Keep `on_list`/`on_event` in step with the cluster until cancelled. A list hands
    `on_list` everything at once, parsed, so a relist is swapped in whole. `alive` is
    told of each list that succeeded and each watch stream that ran to its timeout: a
    watch that tells it nothing for long is stuck or failing (health.py). `lost` is told
    each time the watch stops following the cluster, until `on_list` has everything again."""
    backoff = 0.5
    while True:
        try:
            items, version = await _list(lister, parse)
            on_list(items)
            del items
            if ready is not None:
                ready.set()
            if alive is not None:
                alive()
            backoff = 0.5
            while True:
                version = await _stream(lister, version, on_event, timeout_seconds)
                if alive is not None:
                    alive()
        except Gone:
            log.info("watch expired; listing again", extra={"kind": kind})
            if lost is not None:
                lost()
        except asyncio.CancelledError:
            raise
        except Exception as e:  # any failure: back off, then list again
            if lost is not None:
                lost()
            log.warning("watch failed; retrying", extra={"kind": kind, "error": str(e),
                                                         "retry_in": backoff})
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30.0)


async def _list(lister: Lister, parse: Parse, page: int = 500) -> tuple[list[Any], str]:
    """Everything, in pages, each parsed before the next is read: one 50,000-pod response
    decoded at once would set the process's memory high-water mark for good."""
    items: list[Any] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": page, "_preload_content": False}
        if token:
            kwargs["_continue"] = token
        listed = await json_of(await lister(**kwargs))
        for item in listed.get("items") or []:
            try:
                items.append(parse(item))
            except Exception:
                _passed_over(item)
        token = listed["metadata"].get("continue")
        if not token:
            return items, listed["metadata"]["resourceVersion"]


async def _stream(lister: Lister, version: str, on_event: OnEvent,
                  timeout_seconds: int) -> str:
    try:
        response = await lister(watch=True, resource_version=version,
                                allow_watch_bookmarks=True, timeout_seconds=timeout_seconds,
                                _preload_content=False)
    except ApiException as e:
        if e.status == 410:
            raise Gone from None
        raise
    if response.status == 410:
        raise Gone
    check(response)
    async with response:
        async for line in response.content:
            if not line.strip():
                continue
            event = orjson.loads(line)
            kind, obj = event.get("type"), event.get("object") or {}
            if kind == "ERROR":
                if obj.get("code") == 410:
                    raise Gone
                raise RuntimeError(obj.get("message", "watch error"))
            version = (obj.get("metadata") or {}).get("resourceVersion", version)
            if kind != "BOOKMARK":
                try:
                    on_event(kind, obj)
                except Exception:
                    _passed_over(obj)
    return version


_passed = 0


def _passed_over(obj: Any) -> None:
    global _passed
    meta = (obj.get("metadata") if isinstance(obj, dict) else None) or {}
    log.warning("object cannot be read; passed over", exc_info=True,
                extra={"namespace": meta.get("namespace"), "name": meta.get("name")})
    _passed += 1


def passed_over() -> int:
    """Objects any watch of this process could not take, since it started."""
    return _passed
