"""How `kubectl airlock` reaches a cluster: the user's kubeconfig (`--kubeconfig`, else
KUBECONFIG, else ~/.kube/config; in a pod, its service account) at the context asked for,
and the policy the cluster runs, read from the ConfigMap the deployment mounts into the
webhook and the controller. Anything that goes wrong is a `Failure`: one line a person
can act on, never a traceback."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import orjson
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config.config_exception import ConfigException

from webhook import kubeclient
from webhook.keys import POLICY_CONFIGMAP, SYSTEM_NAMESPACE
from webhook.kuberaw import json_of
from webhook.policy.loading import load_policy
from webhook.policy.model import Policy
from webhook.policy.sources import PolicyError


class Failure(Exception):
    """What went wrong, in one line."""


@dataclass(frozen=True, slots=True)
class Target:
    """The cluster to ask, and the namespace a name without one is in."""

    configuration: client.Configuration
    namespace: str

    @property
    def host(self) -> str:
        return str(self.configuration.host)

    def client(self) -> client.ApiClient:
        return kubeclient.api_client(self.configuration)


async def target(kubeconfig: Path | None, context: str | None, namespace: str | None
                 ) -> Target:
    """The cluster and namespace kubectl would use with the same flags."""
    configuration = client.Configuration()
    if kubeconfig is None and context is None and not os.environ.get("KUBECONFIG") \
            and kubeclient.in_cluster():
        config.load_incluster_config(client_configuration=configuration)
        return Target(configuration, namespace or _pod_namespace())
    where = str(kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config")
    if not _any_file(where):
        raise Failure(f"no kubeconfig: {where} does not exist (--kubeconfig names one)")
    try:
        loader = await config.load_kube_config(
            config_file=None if kubeconfig is None else str(kubeconfig), context=context,
            client_configuration=configuration, persist_config=False)
    except (ConfigException, OSError, ValueError) as e:
        raise Failure(f"no usable kubeconfig ({where}): {_first_line(e)}") from None
    current = loader.current_context or {}
    return Target(configuration, namespace or (current.get("context") or {}).get("namespace")
                  or "default")


def _any_file(paths: str) -> bool:
    """Whether any of a KUBECONFIG-style list of paths is a file."""
    return any(Path(f).expanduser().is_file() for f in paths.split(os.pathsep) if f)


def _pod_namespace() -> str:
    try:
        return Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace").read_text()
    except OSError:
        return "default"


def _first_line(e: BaseException) -> str:
    return (str(e).strip() or type(e).__name__).splitlines()[0]


def failure(e: BaseException, target: Target) -> Failure:
    """The one line that says what an error from the apiserver, or from reaching it,
    means."""
    if isinstance(e, ApiException):
        message = _api_message(e)
        if e.status == 403:
            return Failure(f"forbidden: {message} (kubectl airlock reads with your own "
                           "credentials; docs/kubectl-plugin.md lists what it needs)")
        if e.status == 401:
            return Failure(f"unauthorized: the apiserver at {target.host} refused the "
                           "kubeconfig's credentials")
        return Failure(f"the apiserver at {target.host} answered {e.status} {e.reason}: "
                       f"{message}")
    if isinstance(e, TimeoutError):
        return Failure(f"the apiserver at {target.host} did not answer in time "
                       "(--request-timeout)")
    return Failure(f"cannot reach the apiserver at {target.host}: {_first_line(e)}")


def _api_message(e: ApiException) -> str:
    try:
        body = orjson.loads(e.body or b"{}")
    except orjson.JSONDecodeError:
        body = {}
    found = body.get("message") if isinstance(body, dict) else None
    return str(found or e.reason)


# What `failure` turns into a line: the apiserver's answers and not reaching it.
REACHING: tuple[type[BaseException], ...] = (ApiException, aiohttp.ClientError, OSError,
                                             TimeoutError)


SHOWN = f"ConfigMap {SYSTEM_NAMESPACE}/{POLICY_CONFIGMAP}"


async def cluster_policy_files(api: client.ApiClient) -> dict[str, str]:
    """The policy files the cluster runs, by name, as the ConfigMap holds them."""
    try:
        found: dict[str, Any] = await json_of(
            await client.CoreV1Api(api).read_namespaced_config_map(
                POLICY_CONFIGMAP, SYSTEM_NAMESPACE, _preload_content=False))
    except ApiException as e:
        if e.status == 404:
            raise Failure(f"Airlock's policy is not on this cluster: no {SHOWN} (is Airlock "
                          "installed? --policies DIR reads a policy from files instead)"
                          ) from None
        raise
    return {str(name): str(text) for name, text in (found.get("data") or {}).items()
            if "/" not in str(name) and not str(name).startswith(".")}


@contextlib.contextmanager
def written(files: Mapping[str, str]) -> Iterator[Path]:
    """The policy files in a directory of their own, as the kubelet mounts them, for as
    long as the block runs."""
    with tempfile.TemporaryDirectory(prefix="kubectl-airlock-") as directory:
        for name, text in files.items():
            (Path(directory) / name).write_text(text)
        yield Path(directory)


def load(directory: Path, shown: str) -> Policy:
    """The policy in `directory`, which the user knows as `shown`."""
    try:
        return load_policy(directory)
    except PolicyError as e:
        problems = str(e).replace(f"{directory}/", f"{shown}: ")
        raise Failure(f"the policy in {shown} is not valid: {problems}") from None
