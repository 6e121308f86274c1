"""The controller's own HTTPS port: `/metrics` for Prometheus, behind the scraper's
TokenReview and SubjectAccessReview (webhook/metricsauth), the read-only dashboard
behind the same reviews for its own URL (dashboarding.py), and `/healthz` for the
kubelet, open (probes carry no token), answering 503 with the reasons when the watches or
the decision loop have gone stale (health.py)."""

from __future__ import annotations

import argparse
import logging
import ssl
import tempfile
from pathlib import Path

from aiohttp import web
from kubernetes_asyncio import client
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from webhook.certificates import CERT_FILE, KEY_FILE, make_certs
from webhook.controller.core.health import Health
from webhook.controller.shells import dashboarding
from webhook.metricsauth.guarding import guarded
from webhook.metricsauth.reviewing import Reviewer, reviewer_for
from webhook.reach import resolve

log = logging.getLogger("airlock.controller")

# deploy/base/controller-service.yaml
SERVICE = "airlock-controller-metrics"


def service_hosts(namespace: str) -> tuple[str, ...]:
    return (f"{SERVICE}.{namespace}.svc", f"{SERVICE}.{namespace}.svc.cluster.local",
            f"{SERVICE}.{namespace}", SERVICE, "localhost", "127.0.0.1")


def tls_context(cert_dir: Path | None, hosts: tuple[str, ...]) -> ssl.SSLContext:
    """The pair in `cert_dir` (tls.crt, tls.key), read once at start; without one, a
    certificate made now by a CA made now and forgotten. Nobody can verify that one, but
    a scraper's token still only travels encrypted, as controller-runtime does it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if cert_dir is not None:
        context.load_cert_chain(cert_dir / CERT_FILE, cert_dir / KEY_FILE)
        return context
    # The files live only until they are loaded (under /tmp, the pod's one writable dir).
    with tempfile.TemporaryDirectory(prefix="airlock-metrics-") as scratch:
        made = make_certs(Path(scratch), hosts)
        context.load_cert_chain(made.cert, made.key)
    return context


def app(registry: CollectorRegistry, health: Health, reviewer: Reviewer | None,
        dashboard: tuple[dashboarding.State, Reviewer | None] | None = None
        ) -> web.Application:
    """`dashboard`: what the page shows, and who may see it."""
    async def metrics(_: web.BaseRequest) -> web.Response:
        return web.Response(body=generate_latest(registry),
                            headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(_: web.BaseRequest) -> web.Response:
        problems = health.problems()
        if problems:
            return web.Response(status=503, text="".join(f"{p}\n" for p in problems))
        return web.Response(text="ok\n")

    served = web.Application()
    served.router.add_get("/metrics", guarded(metrics, reviewer))
    served.router.add_get("/healthz", healthz)
    if dashboard is not None:
        dashboarding.add_dashboard(served, *dashboard)
    return served


async def serve(args: argparse.Namespace, registry: CollectorRegistry, health: Health,
                api: client.ApiClient, state: dashboarding.State | None = None
                ) -> web.AppRunner | None:
    """Listen on `--metrics-port` (0: not at all); reviews go through the controller's
    own client. With `state`, the dashboard too."""
    if not args.metrics_port:
        return None
    mode = resolve(args.metrics_auth, args.kubeconfig)
    reviewer = reviewer_for(api) if mode == "kubernetes" else None
    if reviewer is None:
        log.warning("serving /metrics to anyone who reaches the port (--metrics-auth none)")
    context = tls_context(args.metrics_cert_dir, service_hosts(args.namespace))
    viewers = reviewer_for(api, path=dashboarding.PATH) if reviewer is not None else None
    served = app(registry, health, reviewer, None if state is None else (state, viewers))
    runner = web.AppRunner(served, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "0.0.0.0", args.metrics_port, ssl_context=context).start()
    return runner
