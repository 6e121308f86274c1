"""The HTTPS server around the admission engine. It only translates: bytes to Request,
Response to bytes, bad reviews to HTTP 400. It also keeps the certificate and the policy
fresh, and reports readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import orjson
from aiohttp import web
from aiohttp.abc import AbstractStreamWriter
from aiohttp.http_parser import RawRequestMessage
from aiohttp.streams import StreamReader
from aiohttp.web_protocol import RequestHandler
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.admission import aligning, engine
from webhook.admission.certwatching import CertWatcher
from webhook.admission.claiming import keys_of
from webhook.admission.decoding import MAX_BODY, BadReview, decode
from webhook.admission.metrics import Endpoint, WebhookMetrics
from webhook.admission.priorities import UNKNOWN
from webhook.admission.responses import complete
from webhook.certificates import ensure_dev_certs
from webhook.logs import setup_logging
from webhook.metricsauth.guarding import guarded, open_reviewer
from webhook.metricsauth.options import Mode
from webhook.policy.reloading import PolicyStore
from webhook.reach import NoCredentials, resolve

if TYPE_CHECKING:  # the Kubernetes client is imported only where a cluster is asked
    from webhook.admission.claimwatching import ClaimCache
    from webhook.admission.prioritywatching import PriorityCache
    from webhook.metricsauth.reviewing import Reviewer

log = logging.getLogger("airlock.server")

RELOAD_INTERVAL = 2.0
# What one review may take, from the moment it is handled: under the apiserver's 3 s
# timeout (deploy/base/webhook-configurations.yaml), so that Airlock's answer, not the
# failure policy, decides. Only waiting can be cut short (reading the body, a DRA claim the
# watch has not brought yet); the decision itself is pure CPU work, which nothing
# interrupts, so it is bounded instead: every value it reads is (webhook/values.py), and
# the fuzz bench measures that a hostile review costs what an honest one does.
REVIEW_BUDGET = 2.0
# How often the event loop's lag is sampled.
LAG_INTERVAL = 0.25

_Handler = Callable[[web.BaseRequest], Awaitable[web.StreamResponse]]
# HEAD where GET is, as aiohttp's router allows.
_POST, _GET = frozenset({"POST"}), frozenset({"GET", "HEAD"})


class WebhookServer:
    def __init__(self, policies: PolicyStore, certs: CertWatcher,
                 reload_interval: float = RELOAD_INTERVAL) -> None:
        self.policies = policies
        self.certs = certs
        self.reload_interval = reload_interval
        self.budget = REVIEW_BUDGET
        self.draining = False
        # Who may read /metrics; None: anyone (`--metrics-auth none`). Set before listening.
        self.scrapers: Reviewer | None = None
        # Where pods' DRA claims are looked up; None: they are not (`--dra none`).
        self.claims: ClaimCache | None = None
        # The cluster's PriorityClasses; None: not read (`--priority-classes none`).
        self.priorities: PriorityCache | None = None
        self.metrics = WebhookMetrics(
            certs.seconds_to_expiry, lambda: 1.0 if policies.policy is not None else 0.0)

    def reload(self) -> None:
        self.certs.reload_if_changed()
        outcome = self.policies.reload_if_changed()
        if outcome == "reloaded":
            self.metrics.policy_reloads.labels("ok").inc()
        elif outcome == "failed":
            self.metrics.policy_reloads.labels("failed").inc()

    def problems(self) -> list[str]:
        problems = []
        if self.draining:
            problems.append("shutting down")
        if self.policies.policy is None:
            problems.append(f"no policy loaded: {self.policies.last_error or 'not yet read'}")
        cert_problem = self.certs.problem()
        if cert_problem:
            problems.append(cert_problem)
        claims_problem = self.claims.problem() if self.claims is not None else None
        if claims_problem:
            problems.append(claims_problem)
        return problems

    def _reviewer(self, endpoint: Endpoint, handler: engine.Handler) -> _Handler:
        """The coroutine function that answers one review endpoint: a closure, so each
        review is one coroutine with nothing to bind."""
        metrics = self.metrics

        async def answer(request: web.BaseRequest) -> web.Response:
            start = time.perf_counter()
            deadline = time.monotonic() + self.budget
            try:
                async with asyncio.timeout(self.budget):
                    read = await request.read()
                review = decode(read)
            except TimeoutError:
                metrics.rejected(endpoint)
                return web.Response(status=408, text=f"the review's body did not arrive "
                                                     f"within {self.budget:g} s\n")
            except (BadReview, web.HTTPRequestEntityTooLarge) as e:
                message = str(e) if isinstance(e, BadReview) else \
                    f"body exceeds the limit of {MAX_BODY} bytes (3 MiB)"
                metrics.rejected(endpoint)
                return web.Response(status=400, text=message + "\n")
            claims = None
            if self.claims is not None and (keys := keys_of(review.object)):
                claims = await self.claims.lookup(review.namespace, keys, deadline)
            response = engine.handle(handler, review, self.policies.policy, claims,
                                     UNKNOWN if self.priorities is None else
                                     self.priorities.known)
            body = complete(review.uid, response)
            seconds = time.perf_counter() - start
            metrics.answered(endpoint, response.allowed, response.outcome, seconds)
            if seconds > self.budget:
                # Something unbounded got through: the apiserver may have given up on it.
                log.warning("review over its budget", extra={
                    "uid": review.uid, "seconds": round(seconds, 3), "budget": self.budget})
            return web.Response(body=body, content_type="application/json")

        return answer

    async def healthz(self, _: web.BaseRequest) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, _: web.BaseRequest) -> web.Response:
        problems = self.problems()
        status = 503 if problems else 200
        body = {"ready": not problems, "problems": problems,
                "policyError": self.policies.last_error}
        return web.Response(status=status, body=orjson.dumps(body),
                            content_type="application/json")

    async def metrics_endpoint(self, _: web.BaseRequest) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    def _routes(self) -> dict[str, tuple[frozenset[str], _Handler]]:
        return {
            "/mutate": (_POST, self._reviewer("mutate", engine.MUTATE)),
            "/validate": (_POST, self._reviewer("validate", engine.VALIDATE)),
            "/claims": (_POST, self._reviewer("claims", aligning.align)),
            "/healthz": (_GET, self.healthz),
            "/readyz": (_GET, self.readyz),
            "/metrics": (_GET, guarded(self.metrics_endpoint, self.scrapers)),
        }

    def http_server(self) -> web.Server:
        """aiohttp's low-level server with a route per path: six fixed endpoints need no
        Application, router or middleware chain, which cost a review about 4% of its
        instructions (docs/benchmarks.md, "Admission")."""
        routes = self._routes()
        loop = asyncio.get_running_loop()

        # Not a coroutine itself: it hands aiohttp the endpoint's, one coroutine a request.
        def dispatch(request: web.BaseRequest) -> Awaitable[web.StreamResponse]:
            route = routes.get(request.path)
            if route is None:
                raise web.HTTPNotFound(text=f"no endpoint {request.path}; Airlock serves "
                                            f"{', '.join(routes)}\n")
            methods, handler = route
            if request.method not in methods:
                raise web.HTTPMethodNotAllowed(request.method, sorted(methods))
            return handler(request)

        def request(message: RawRequestMessage, payload: StreamReader,
                    protocol: RequestHandler, writer: AbstractStreamWriter,
                    task: asyncio.Task[None]) -> web.BaseRequest:
            return web.BaseRequest(message, payload, protocol, writer, task, loop,
                                   client_max_size=MAX_BODY)

        return web.Server(dispatch, request_factory=request, access_log=None)

    async def reload_forever(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval)
            self.reload()

    async def measure_lag_forever(self) -> None:
        """How late the loop wakes a timer: what a review waits behind whatever holds it."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + LAG_INTERVAL
            await asyncio.sleep(LAG_INTERVAL)
            self.metrics.lagged(max(loop.time() - due, 0.0))


@dataclass
class Listening:
    """A server listening on a port, reloading its certificate and policy and measuring
    its event loop's lag."""

    runner: web.ServerRunner
    chores: tuple[asyncio.Task[None], ...]
    port: int

    async def close(self) -> None:
        """Stop the chores, stop listening, and let the requests under way finish."""
        for chore in self.chores:
            chore.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await chore
        await self.runner.cleanup()


async def listen(server: WebhookServer, host: str, port: int,
                 shutdown_timeout: float = 15) -> Listening:
    """Serve on `host`:`port` (0: any free port) over the server's TLS context."""
    runner = web.ServerRunner(server.http_server(), shutdown_timeout=shutdown_timeout)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=server.certs.context).start()
    bound: int = runner.addresses[0][1]
    return Listening(runner, (asyncio.create_task(server.reload_forever()),
                              asyncio.create_task(server.measure_lag_forever())), bound)


def build_server(cert_dir: Path, policies: Path,
                 reload_interval: float = RELOAD_INTERVAL) -> WebhookServer:
    certs = CertWatcher(cert_dir)
    store = PolicyStore(policies)
    server = WebhookServer(store, certs, reload_interval)
    server.reload()
    return server


async def _serve(server: WebhookServer, host: str, port: int, drain_seconds: float,
                 auth: Mode, reads: tuple[Mode, Mode], kubeconfig: Path | None) -> None:
    """`reads`: whether DRA claims, and PriorityClasses, are read from the cluster."""
    server.scrapers = await open_reviewer(auth, kubeconfig)
    watching = []
    if reads[0] == "kubernetes":
        from webhook.admission.claimwatching import open_claims

        server.claims = await open_claims(kubeconfig)
        watching.append((asyncio.create_task(server.claims.run()), server.claims.api))
    if reads[1] == "kubernetes":
        from webhook.admission.prioritywatching import open_priorities

        server.priorities = await open_priorities(kubeconfig)
        watching.append((asyncio.create_task(server.priorities.run()),
                         server.priorities.api))
    listening = await listen(server, host, port)
    log.info("serving", extra={"host": host, "port": port,
                               "policies": str(server.policies.directory)})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    # Report not-ready first and keep serving while the endpoint is removed and the
    # apiserver stops sending; then close and let the requests under way finish.
    server.draining = True
    log.info("stopping: not ready, draining", extra={"seconds": drain_seconds})
    await asyncio.sleep(drain_seconds)
    await listening.close()
    for task, api in watching:
        task.cancel()
        await api.close()
    if server.scrapers is not None:
        await server.scrapers.close()
    log.info("stopped")


def run_server(port: int, cert_dir: Path | None, policies: Path, host: str = "0.0.0.0",
               drain_seconds: float = 5.0, auth: Mode | None = None,
               kubeconfig: Path | None = None, dra: Mode | None = None,
               priority_classes: Mode | None = None) -> int:
    setup_logging()
    if cert_dir is None:
        cert_dir = Path("certs")
        ensure_dev_certs(cert_dir)
        log.info("using development certificates", extra={"dir": str(cert_dir)})
    server = build_server(cert_dir, policies)
    if server.certs.not_after is None:
        log.error("cannot serve without a certificate", extra={"error": server.certs.error})
        print(f"airlock serve: {server.certs.error}", file=sys.stderr)
        return 1
    for problem in server.problems():
        log.error("not ready", extra={"problem": problem})
    mode = resolve(auth, kubeconfig)
    if mode == "none":
        log.warning("serving /metrics to anyone who reaches the port (--metrics-auth none)")
    claims = resolve(dra, kubeconfig)
    if claims == "none":
        log.warning("not reading DRA claims (--dra none): a pod that claims GPUs through "
                    "resourceClaims is judged without them")
    priorities = resolve(priority_classes, kubeconfig)
    if priorities == "none":
        log.info("not reading PriorityClasses (--priority-classes none): a pod whose "
                 "priorityClassName Airlock sets is mutated twice")
    try:
        asyncio.run(_serve(server, host, port, drain_seconds, mode, (claims, priorities),
                           kubeconfig))
    except NoCredentials as e:
        log.error("cannot start", extra={"error": str(e)})
        print(f"airlock serve: {e}", file=sys.stderr)
        return 1
    return 0
