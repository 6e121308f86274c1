"""Raw responses. With `_preload_content=False` the client skips its model objects, and
also its status check: every raw call goes through here so a 404 or 409 is an error,
never a Status object mistaken for the resource."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes_asyncio.client.exceptions import ApiException


def check(response: Any) -> None:
    if not 200 <= response.status <= 299:
        raise ApiException(status=response.status, reason=response.reason)


async def json_of(response: Any) -> dict[str, Any]:
    """The body of a successful response; ApiException (with the status) otherwise."""
    async with response:
        check(response)
        body: dict[str, Any] = orjson.loads(await response.read())
        return body
