"""Asking the apiserver again while it cannot answer yet. A restarted apiserver answers
for a moment what it will not answer once up: 503 before all its paths are installed, 429
while a CRD's storage starts, 403 before its authorizer has read the RBAC objects; or it
takes no connection at all. What the controller reads once, as it starts or begins to
lead, must not take such an answer for the real one: the soak (bench/soak) caught a
controller exiting on the 403, and another waiting for ever on a watch of something the
503 made it believe was there."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import aiohttp
from kubernetes_asyncio.client.exceptions import ApiException

log = logging.getLogger("airlock.controller")

T = TypeVar("T")
FIRST_PAUSE, LONGEST_PAUSE = 0.1, 5.0


async def patiently(call: Callable[[], Awaitable[T]], what: str,
                    answers: frozenset[int] = frozenset({404}),
                    within: float | None = None) -> T:
    """`call`'s result. An ApiException whose status is in `answers` is the apiserver's
    answer, raised at once; any other error is asked again, pausing longer each time,
    until `within` seconds have passed (None: until it answers), then raised."""
    deadline = None if within is None else time.monotonic() + within
    pause = FIRST_PAUSE
    while True:
        try:
            return await call()
        except ApiException as e:
            if e.status in answers or (deadline is not None and time.monotonic() > deadline):
                raise
            problem = f"{e.status} {e.reason}"
        except (aiohttp.ClientError, OSError) as e:
            if deadline is not None and time.monotonic() > deadline:
                raise
            problem = str(e) or type(e).__name__
        log.warning("the apiserver cannot answer yet; asking again",
                    extra={"what": what, "error": problem, "retry_in": pause})
        await asyncio.sleep(pause)
        pause = min(pause * 2, LONGEST_PAUSE)
