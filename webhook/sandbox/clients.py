"""kubernetes_asyncio clients for a kubeconfig, a bearer token or an impersonated user."""

from __future__ import annotations

from pathlib import Path

from kubernetes_asyncio import client, config

from webhook import kubeclient
from webhook.controller.shells.applying import WRITES_IN_FLIGHT


async def from_kubeconfig(path: Path, impersonate: str | None = None,
                          groups: tuple[str, ...] = ()) -> client.ApiClient:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(path), client_configuration=configuration)
    # As many in flight as the controller keeps, so benchmarks compare like with like.
    api = kubeclient.api_client(configuration, in_flight=WRITES_IN_FLIGHT + 8)
    if impersonate:
        api.set_default_header("Impersonate-User", impersonate)
        for group in groups:
            # The client sends one value per header name; one group is what tests need.
            api.set_default_header("Impersonate-Group", group)
    return api


def from_token(server: str, ca_file: Path, token: str) -> client.ApiClient:
    configuration = client.Configuration(host=server)
    configuration.ssl_ca_cert = str(ca_file)
    configuration.api_key = {"BearerToken": token}
    configuration.api_key_prefix = {"BearerToken": "Bearer"}
    return kubeclient.api_client(configuration)


async def service_account_token(api: client.ApiClient, namespace: str, name: str,
                                seconds: int = 3600) -> str:
    """A token for the ServiceAccount through the TokenRequest API."""
    core = client.CoreV1Api(api)
    response = await core.create_namespaced_service_account_token(
        name, namespace, body={"spec": {"expirationSeconds": seconds}})
    token: str = response.status.token
    return token
