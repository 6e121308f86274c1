"""The dashboard: a read-only page (`/dashboard`, plain HTML and a little JS shipped in
`dashboard/`) and the one JSON it polls (`/dashboard/state`), on the controller's HTTPS
port, behind the same TokenReview and SubjectAccessReview as `/metrics`: `get` on the
non-resource URL `/dashboard`, asked for both. A browser cannot send a bearer header
when it opens a page, so the token may also come in the cookie the page's form sets.
Every refusal is a 403 (the page says why): a browser answers no Bearer challenge.

The JSON is what `airlock status -o json` says (`reporting.report`, over a copy of the
controller's live cache: a report's dry run must not consume what the cache tells the
controller's own accounts), plus the cluster map (`mapping.cluster_map`). It is computed
at most every few seconds, whoever polls."""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable
from importlib import resources
from typing import Any

from aiohttp import web

from webhook.accelerators import Accelerators
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.configuring import quotas_of
from webhook.controller.core.mapping import cluster_map, timestamp
from webhook.controller.core.queues.accounting import Accounts
from webhook.controller.core.reporting import report
from webhook.controller.shells.cache import Cache
from webhook.metricsauth.guarding import guarded
from webhook.metricsauth.reviewing import Reviewer
from webhook.metricsauth.verdicts import Verdict
from webhook.policy.model import Policy

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

State = Callable[[], dict[str, Any]]


def asset(name: str) -> str:
    return resources.files(__package__).joinpath("dashboard", name).read_text()


def state_of(policy: Policy, cache: Cache, accounts: Accounts, accelerators: Accelerators,
             now: float) -> dict[str, Any]:
    """What `airlock status -o json` says of the cluster the cache holds (without recent
    preemptions: the controller watches no events), and the cluster map."""
    cluster = Tracked.of(cache.nodes.values(), cache.pods.values(), accelerators)
    found = report(policy, cluster, (), now, accounts.memory(), cache.placeholders.values(),
                   cache.requests.values())
    queues = quotas_of(policy, cluster.accelerators)
    drawn = cluster_map(cluster, policy.topology_levels, accounts.reservation,
                        queues.queue_of)
    return {"at": timestamp(now), **found.as_json(), "clusterMap": drawn.as_json()}


class Recent:
    """The last state computed, served again while it is fresh."""

    def __init__(self, compute: State, clock: Callable[[], float] = time.monotonic) -> None:
        self.compute, self.clock = compute, clock
        self._body: bytes = b""
        self._at = float("-inf")
        self._fresh_for = FRESH_FOR

    def body(self) -> bytes:
        if self.clock() - self._at >= self._fresh_for:
            began = self.clock()
            self._body = json.dumps(self.compute(), separators=(",", ":")).encode()
            self._at = self.clock()
            self._fresh_for = max(FRESH_FOR, REST_PER_COMPUTE * (self._at - began))
        return self._body


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
        return web.Response(body=recent.body(), content_type="application/json",
                            headers=HEADERS)

    def static(name: str, kind: str) -> Callable[[web.BaseRequest], Any]:
        async def handler(_: web.BaseRequest) -> web.Response:
            return web.Response(text=asset(name), content_type=kind, headers=HEADERS)
        return handler

    served.router.add_get(PATH, guarded(page, reviewer, denied_page, COOKIE))
    served.router.add_get(f"{PATH}/state", guarded(polled, reviewer, denied_json, COOKIE))
    for name, kind in ASSETS.items():
        served.router.add_get(f"{PATH}/{name}", static(name, kind))
