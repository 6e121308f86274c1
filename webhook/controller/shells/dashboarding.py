"""The dashboard: a read-only page (`/dashboard`, plain HTML and a little JS shipped in
`dashboard/`) and the one JSON it polls (`/dashboard/state`), on the controller's HTTPS
port, behind the same TokenReview and SubjectAccessReview as `/metrics`: `get` on the
non-resource URL `/dashboard`, asked for both. A browser cannot send a bearer header
when it opens a page, so the token may also come in the cookie the page's form sets.
Every refusal is a 403 (the page says why): a browser answers no Bearer challenge.

The JSON is what `airlock status -o json` says (`reporting.report`, over a copy of the
controller's live cache: a report's dry run must not consume what the cache tells the
controller's own accounts), plus the cluster map (`mapping.cluster_map`). It is computed
in a thread, at most every few seconds, whoever polls."""

from __future__ import annotations

import asyncio
import functools
import html
import json
import logging
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web

from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.configuring import quotas_of
from webhook.controller.core.growth.asking import Asking
from webhook.controller.core.identities import UnitId
from webhook.controller.core.mapping import cluster_map, timestamp
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.accounting import Accounts
from webhook.controller.core.reporting import report
from webhook.controller.shells.cache import Cache
from webhook.metricsauth.guarding import guarded
from webhook.metricsauth.reviewing import Reviewer
from webhook.metricsauth.verdicts import Verdict
from webhook.policy.model import Policy

log = logging.getLogger("airlock.controller")

PATH = "/dashboard"
# Where the page's form keeps the token it was given (the browser's session only).
COOKIE = "airlock-dashboard-token"
# Seconds a computed state is served again, at least: a round's dry run per viewer per
# poll would cost the controller as many rounds. And at least this many times as long as
# computing it took, so that the page takes a tenth of the controller's core at most (at
# 5,120 nodes and as many pods, a state takes about half a second: one every 5 s).
FRESH_FOR = 2.0
REST_PER_COMPUTE = 10.0
# The page loads nothing but its own script and style, and talks only to its origin.
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
                               "connect-src 'self'; img-src 'self'; base-uri 'none'; "
                               "form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
ASSETS = {"dashboard.js": "text/javascript", "dashboard.css": "text/css"}

# Takes what a state is computed from (in the event loop, cheap: copies of the cache's
# lists), and returns the computation, run in a thread so the watches and rounds go on.
State = Callable[[], Callable[[], dict[str, Any]]]


def asset(name: str) -> str:
    return resources.files(__package__).joinpath("dashboard", name).read_text()


def state_of(policy: Policy, cache: Cache, accounts: Accounts, accelerators: Accelerators,
             now: float) -> Callable[[], dict[str, Any]]:
    """What `airlock status -o json` says of the cluster the cache holds (without recent
    preemptions: the controller watches no events), and the cluster map: computed from
    copies of what the cache and the accounts hold now, which nothing changes after."""
    return functools.partial(
        _state, policy, list(cache.nodes.values()), list(cache.pods.values()), accelerators,
        accounts.memory(), accounts.reservation, list(cache.placeholders.values()),
        list(cache.requests.values()), now)


def _state(policy: Policy, nodes: list[NodeInfo], pods: list[PodInfo],
           accelerators: Accelerators, memory: dict[str, str],
           reservation: tuple[UnitId, str] | None, placeholders: list[Asking],
           requests: list[Asking], now: float) -> dict[str, Any]:
    cluster = Tracked.of(nodes, pods, accelerators)
    found = report(policy, cluster, (), now, memory, placeholders, requests)
    queues = quotas_of(policy, cluster.accelerators)
    drawn = cluster_map(cluster, policy.topology_levels, reservation, queues.queue_of)
    return {"at": timestamp(now), **found.as_json(), "clusterMap": drawn.as_json()}


class Recent:
    """The last state computed, served again while it is fresh."""

    def __init__(self, take: State, clock: Callable[[], float] = time.monotonic) -> None:
        self.take, self.clock = take, clock
        self._body: bytes = b""
        self._at = float("-inf")
        self._fresh_for = FRESH_FOR
        # Polls that come while a state is computed wait for it.
        self._computing = asyncio.Lock()

    async def body(self) -> bytes:
        async with self._computing:
            if self.clock() - self._at >= self._fresh_for:
                began = self.clock()
                compute = self.take()
                self._body = await asyncio.to_thread(_encoded, compute)
                self._at = self.clock()
                self._fresh_for = max(FRESH_FOR, REST_PER_COMPUTE * (self._at - began))
        return self._body


def _encoded(compute: Callable[[], dict[str, Any]]) -> bytes:
    return json.dumps(compute(), separators=(",", ":")).encode()


def denied_page(verdict: Verdict) -> web.Response:
    page = asset("denied.html").replace("{reason}", html.escape(verdict.reason))
    return web.Response(status=403, text=page, content_type="text/html", headers=HEADERS)


def denied_json(verdict: Verdict) -> web.Response:
    return web.Response(status=403, content_type="application/json", headers=HEADERS,
                        text=json.dumps({"status": 403, "reason": verdict.reason}))


def add_dashboard(served: web.Application, state: State, reviewer: Reviewer | None) -> None:
    """The page, its JSON and its two assets (code anyone may read: no data) on `served`."""
    recent = Recent(state)

    async def page(_: web.BaseRequest) -> web.Response:
        return web.Response(text=asset("index.html"), content_type="text/html",
                            headers=HEADERS)

    async def polled(_: web.BaseRequest) -> web.Response:
        try:
            body = await recent.body()
        except Exception as e:  # the page says so and polls again; the controller goes on
            log.exception("dashboard state failed")
            return web.Response(status=503, content_type="application/json", headers=HEADERS,
                                text=json.dumps({"status": 503, "reason": f"{type(e).__name__}: "
                                                 f"{str(e)[:200]}"}))
        return web.Response(body=body, content_type="application/json", headers=HEADERS)

    def static(name: str, kind: str) -> Callable[[web.BaseRequest], Any]:
        async def handler(_: web.BaseRequest) -> web.Response:
            return web.Response(text=asset(name), content_type=kind, headers=HEADERS)
        return handler

    served.router.add_get(PATH, guarded(page, reviewer, denied_page, COOKIE))
    served.router.add_get(f"{PATH}/state", guarded(polled, reviewer, denied_json, COOKIE))
    for name, kind in ASSETS.items():
        served.router.add_get(f"{PATH}/{name}", static(name, kind))
