"""The HTTPS server around the admission engine. It only translates: bytes to Request,
Response to bytes, bad reviews to HTTP 400. It also keeps the certificate and the policy
fresh, and reports readiness and metrics."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from webhook.admission import engine
from webhook.admission.certwatching import CertWatcher
from webhook.admission.decoding import MAX_BODY, BadReview, decode
from webhook.admission.metrics import Endpoint, WebhookMetrics
from webhook.admission.responses import complete
from webhook.certificates import ensure_dev_certs
from webhook.logs import setup_logging
from webhook.policy.reloading import PolicyStore

log = logging.getLogger("airlock.server")

RELOAD_INTERVAL = 2.0

class WebhookServer:
    def __init__(self, policies: PolicyStore, certs: CertWatcher,
                 reload_interval: float = RELOAD_INTERVAL) -> None:
        self.policies = policies
        self.certs = certs
        self.reload_interval = reload_interval
        self.draining = False
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
        return problems

    async def _review(self, request: web.Request, endpoint: Endpoint,
                      handler: engine.Handler) -> web.Response:
        start = time.perf_counter()
        try:
            review = decode(await request.read())
        except (BadReview, web.HTTPRequestEntityTooLarge) as e:
            message = str(e) if isinstance(e, BadReview) else \
                f"body exceeds the limit of {MAX_BODY} bytes (3 MiB)"
            self.metrics.rejected(endpoint)
            return web.Response(status=400, text=message + "\n")
        response = engine.handle(handler, review, self.policies.policy)
        body = complete(review.uid, response)
        if response.outcome is not None:
            self.metrics.decided(response.outcome)
        self.metrics.answered(endpoint, response.allowed, time.perf_counter() - start)
        return web.Response(body=body, content_type="application/json")

    async def healthz(self, _: web.Request) -> web.Response:
        return web.Response(text="ok\n")

    async def readyz(self, _: web.Request) -> web.Response:
        problems = self.problems()
        status = 503 if problems else 200
        body = {"ready": not problems, "problems": problems,
                "policyError": self.policies.last_error}
        return web.Response(status=status, body=orjson.dumps(body),
                            content_type="application/json")

    async def metrics_endpoint(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(self.metrics.registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _reloading(self, _app: web.Application) -> AsyncIterator[None]:
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.reload_interval)
                self.reload()

        task = asyncio.create_task(loop())
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        # Partials, not methods that await _review: one coroutine a review, not two.
        app.router.add_post("/mutate", functools.partial(
            self._review, endpoint="mutate", handler=engine.MUTATE))
        app.router.add_post("/validate", functools.partial(
            self._review, endpoint="validate", handler=engine.VALIDATE))
        app.router.add_get("/healthz", self.healthz)
        app.router.add_get("/readyz", self.readyz)
        app.router.add_get("/metrics", self.metrics_endpoint)
        app.cleanup_ctx.append(self._reloading)
        return app


def build_server(cert_dir: Path, policies: Path,
                 reload_interval: float = RELOAD_INTERVAL) -> WebhookServer:
    certs = CertWatcher(cert_dir)
    store = PolicyStore(policies)
    server = WebhookServer(store, certs, reload_interval)
    server.reload()
    return server


async def _serve(server: WebhookServer, host: str, port: int, drain_seconds: float) -> None:
    runner = web.AppRunner(server.app(), access_log=None, shutdown_timeout=15)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=server.certs.context).start()
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
    await runner.cleanup()
    log.info("stopped")


def run_server(port: int, cert_dir: Path | None, policies: Path, host: str = "0.0.0.0",
               drain_seconds: float = 5.0) -> int:
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
    asyncio.run(_serve(server, host, port, drain_seconds))
    return 0
