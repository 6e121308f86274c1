"""One way to make a kubernetes_asyncio ApiClient, for the controller, the sandbox, the
tests and the benchmarks alike, so that a figure measured with one holds for the others.

Two of the generated client's defaults cost the controller its write throughput:
- its pool allows 5 connections per core, whatever the caller keeps in flight;
- its aiohttp session trusts the environment, so every request looks up proxy variables
  and parses `~/.netrc` in a worker thread (a thread hop per request; a profile of the
  controller lifting gangs spent more time there than in sending the requests).
Here the proxy the environment names for the apiserver (HTTPS_PROXY, NO_PROXY) is looked
up once, when the client is made, and the session no longer asks again. `.netrc` is not
read: no Kubernetes client authenticates with it.
"""

from __future__ import annotations

import os
import urllib.parse
import urllib.request
from pathlib import Path

import aiohttp
from kubernetes_asyncio import client, config

# The generated client's own read buffer: watch events carry whole objects (up to etcd's
# 1.5 MiB request limit).
_READ_BUFFER = 2**21


def env_proxy(url: str) -> str | None:
    """The proxy the environment names for `url`, as aiohttp would find it per request."""
    parts = urllib.parse.urlsplit(url)
    if not parts.hostname or urllib.request.proxy_bypass(parts.hostname):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def api_client(configuration: client.Configuration, in_flight: int = 8) -> client.ApiClient:
    """An ApiClient with room for `in_flight` requests at once, which reads the
    environment's proxy settings once instead of on every request. Call it with an event
    loop running (aiohttp binds its session to it)."""
    configuration.connection_pool_maxsize = in_flight
    if not configuration.proxy:
        configuration.proxy = env_proxy(configuration.host)
    api = client.ApiClient(configuration=configuration)
    rest = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    connector = session.connector
    session.detach()  # the new session takes over the connector and its TLS settings
    rest.pool_manager = aiohttp.ClientSession(connector=connector, trust_env=False,
                                              read_bufsize=_READ_BUFFER)
    rest.proxy = configuration.proxy
    return api


def in_cluster() -> bool:
    """In a pod: the kubelet always sets the apiserver's address (enableServiceLinks or
    not)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


async def load_configuration(kubeconfig: Path | None, context: str | None = None
                             ) -> client.Configuration:
    """Credentials from `kubeconfig`, else the pod's service account, else
    ~/.kube/config; from its `context` where one is named, else its current one."""
    configuration = client.Configuration()
    if kubeconfig is not None:
        await config.load_kube_config(config_file=str(kubeconfig), context=context,
                                      client_configuration=configuration)
    elif in_cluster() and context is None:
        config.load_incluster_config(client_configuration=configuration)
    else:
        await config.load_kube_config(context=context, client_configuration=configuration)
    return configuration
