"""Both components' /metrics behind the scraper's TokenReview and SubjectAccessReview,
against the real apiserver: no token 401, a token whose user may not get /metrics 403, a
token bound to airlock-metrics-reader 200 with Prometheus' text. The webhook runs with
its own ServiceAccount's credentials (--kubeconfig, out of cluster as the sandbox runs
it), the controller with its own: exactly the RBAC deploy/ grants them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.kube import Controllers, Scrapers, metrics_url, scrape, until
from webhook.certificates import make_certs
from webhook.sandbox.processes import Webhook, start_webhook

Target = tuple[str, Path | None]  # the /metrics URL, and the CA that verifies it


@pytest.fixture(scope="module")
def reviewing_webhook(tmp_path_factory: pytest.TempPathFactory, session_policies: Path,
                      webhook_kubeconfig: Path) -> Iterator[Webhook]:
    """A webhook of its own (the session's runs as on a laptop, /metrics open), with
    --metrics-auth kubernetes as deploy/ runs it."""
    hook = start_webhook(tmp_path_factory.mktemp("reviewing-webhook"), session_policies,
                         extra=["--kubeconfig", str(webhook_kubeconfig),
                                "--metrics-auth", "kubernetes"])
    yield hook
    hook.running.process.terminate()
    hook.running.process.wait(timeout=20)


async def _controller_target(controllers: Controllers, *extra: str,
                             ca: Path | None = None) -> Target:
    """A controller started with its defaults (in the sandbox: --kubeconfig, so metrics
    auth on), once its port answers /healthz, which takes no token."""
    base = metrics_url(controllers.start(*extra))

    async def up() -> bool:
        try:
            return (await scrape(f"{base}/healthz", ca=ca))[0] == 200
        except OSError:
            return False

    await until(up)
    return f"{base}/metrics", ca


@pytest.fixture(params=["webhook", "controller"])
async def target(request: pytest.FixtureRequest, controllers: Controllers,
                 reviewing_webhook: Webhook) -> Target:
    if request.param == "webhook":
        return f"{reviewing_webhook.url}/metrics", reviewing_webhook.certs.ca
    return await _controller_target(controllers)


async def test_metrics_need_a_token_the_apiserver_allows(target: Target,
                                                         scrapers: Scrapers) -> None:
    url, ca = target
    status, text = await scrape(url, ca=ca)
    assert (status, text) == (401, "Unauthorized: /metrics needs a bearer token\n")
    status, text = await scrape(url, "not-a-token", ca=ca)
    assert (status, text) == (401, "Unauthorized: the token was not authenticated\n")
    status, text = await scrape(url, scrapers.stranger, ca=ca)
    assert status == 403
    assert f'user "system:serviceaccount:{scrapers.namespace}:stranger" may not get ' \
           f"/metrics" in text
    status, text = await scrape(url, scrapers.reader, ca=ca)
    assert status == 200
    assert "# TYPE airlock_" in text
    # Remembered: the same answers again (the reviews are not asked twice a minute).
    assert (await scrape(url, scrapers.reader, ca=ca))[0] == 200
    assert (await scrape(url, scrapers.stranger, ca=ca))[0] == 403


async def test_controller_serves_a_mounted_certificate(controllers: Controllers,
                                                       scrapers: Scrapers,
                                                       tmp_path: Path) -> None:
    certs = make_certs(tmp_path / "metrics-certs", ("localhost", "127.0.0.1"))
    url, ca = await _controller_target(
        controllers, "--metrics-cert-dir", str(certs.cert.parent), ca=certs.ca)
    status, text = await scrape(url, scrapers.reader, ca=ca)
    assert status == 200
    assert "airlock_gangs_waiting" in text
