"""The client factory keeps what the environment says about proxies, read once."""

from __future__ import annotations

import pytest
from kubernetes_asyncio import client

from webhook import kubeclient

APISERVER = "https://10.96.0.1:443"


@pytest.fixture
def no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                 "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(("env", "expected"), [
    ({}, None),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "http://proxy:3128"),
    ({"https_proxy": "http://proxy:3128", "no_proxy": "10.96.0.1"}, None),
    ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com"}, "http://proxy:3128"),
    ({"HTTP_PROXY": "http://proxy:3128"}, None),  # an http proxy is not for https
])
def test_the_environment_names_the_proxy_for_the_apiserver(
        no_proxy_env: pytest.MonkeyPatch, env: dict[str, str], expected: str | None) -> None:
    for name, value in env.items():
        no_proxy_env.setenv(name, value)
    assert kubeclient.env_proxy(APISERVER) == expected


async def test_the_client_keeps_the_proxy_and_stops_asking_per_request(
        no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://proxy:3128")
    configuration = client.Configuration(host=APISERVER)
    async with kubeclient.api_client(configuration, in_flight=40) as api:
        session = api.rest_client.pool_manager
        assert session.trust_env is False
        assert api.rest_client.proxy == "http://proxy:3128"
        assert session.connector.limit == 40


async def test_a_proxy_from_the_kubeconfig_wins(no_proxy_env: pytest.MonkeyPatch) -> None:
    no_proxy_env.setenv("HTTPS_PROXY", "http://env-proxy:3128")
    configuration = client.Configuration(host=APISERVER)
    configuration.proxy = "http://kubeconfig-proxy:8080"
    async with kubeclient.api_client(configuration) as api:
        assert api.rest_client.proxy == "http://kubeconfig-proxy:8080"
