"""The controller's metrics port, served for real over TLS on loopback: HTTPS with the
certificate made at start or a mounted one, /healthz open and 503 with its reasons when
the controller has gone stale, /metrics open with `--metrics-auth none` and, with
`kubernetes`, refused (never a 500) when the apiserver cannot be asked."""

from __future__ import annotations

import argparse
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from kubernetes_asyncio import client

from tests.builders import Clock
from webhook import kubeclient
from webhook.certificates import make_certs
from webhook.controller.core.health import Health
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.controller.shells.serving import serve
from webhook.sandbox.launching import free_port


@pytest.fixture
async def unreachable() -> AsyncIterator[client.ApiClient]:
    """A client for an apiserver that is not there: every review fails to connect."""
    configuration = client.Configuration(host=f"https://127.0.0.1:{free_port()}")
    async with kubeclient.api_client(configuration) as api:
        yield api


@pytest.fixture
async def port(unreachable: client.ApiClient) -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start the port with the given flags (and a health); its base URL."""
    runners: list[web.AppRunner] = []

    async def start(health: Health, auth: str, cert_dir: Path | None = None) -> str:
        number = free_port()
        args = argparse.Namespace(metrics_port=number, metrics_auth=auth, kubeconfig=None,
                                  metrics_cert_dir=cert_dir, namespace="airlock-system")
        runner = await serve(args, ControllerMetrics().registry, health, unreachable)
        assert runner is not None
        runners.append(runner)
        return f"https://127.0.0.1:{number}"

    yield start
    for runner in runners:
        await runner.cleanup()


async def get(url: str, verify: ssl.SSLContext | bool = False,
              headers: dict[str, str] | None = None) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, \
            http.get(url, ssl=verify, headers=headers or {}) as response:
        return response.status, await response.text()


async def test_health_is_open_and_says_what_went_stale(
        port: Callable[..., Awaitable[str]]) -> None:
    clock = Clock()
    health = Health(clock)
    health.watching("pods")
    health.leading()
    base = await port(health, "kubernetes")
    assert await get(f"{base}/healthz") == (200, "ok\n")
    clock.now = 601
    status, text = await get(f"{base}/healthz")
    assert status == 503
    assert text == ("pods watch: no successful list or watch for 601 s (limit 600 s)\n"
                    "leading, but no decision loop completed for 601 s (limit 180 s)\n")


async def test_metrics_are_refused_not_failed_when_the_apiserver_is_away(
        port: Callable[..., Awaitable[str]]) -> None:
    base = await port(Health(), "kubernetes")
    assert await get(f"{base}/metrics") == (401,
                                            "Unauthorized: /metrics needs a bearer token\n")
    assert await get(f"{base}/metrics", headers={"Authorization": "Bearer t"}) == (
        401, "Unauthorized: the token review failed\n")


async def test_without_auth_metrics_are_served_to_anyone(
        port: Callable[..., Awaitable[str]]) -> None:
    base = await port(Health(), "none")
    status, text = await get(f"{base}/metrics")
    assert status == 200
    assert "# TYPE airlock_gangs_waiting gauge" in text


async def test_a_mounted_certificate_is_served(port: Callable[..., Awaitable[str]],
                                               tmp_path: Path) -> None:
    certs = make_certs(tmp_path, ("localhost", "127.0.0.1"))
    base = await port(Health(), "none", certs.cert.parent)
    verify = ssl.create_default_context(cafile=str(certs.ca))
    assert await get(f"{base}/healthz", verify) == (200, "ok\n")


async def test_the_certificate_made_at_start_is_only_for_encryption(
        port: Callable[..., Awaitable[str]], tmp_path: Path) -> None:
    base = await port(Health(), "none")
    with pytest.raises(aiohttp.ClientConnectorCertificateError):
        await get(f"{base}/healthz", ssl.create_default_context(
            cafile=str(make_certs(tmp_path).ca)))
    assert await get(f"{base}/healthz") == (200, "ok\n")
