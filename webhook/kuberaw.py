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
    """The body of a successful response; ApiException otherwise, with the status and the
    apiserver's own explanation (a Status object) as its body."""
    async with response:
        data = await response.read()
        if not 200 <= response.status <= 299:
            error = ApiException(status=response.status, reason=response.reason)
            error.body = data.decode(errors="replace")
            raise error
        body: dict[str, Any] = orjson.loads(data)
        return body
