"""Real operators against a sandbox: build them once (cached beside the Kubernetes
binaries, their manifests beside them: webhook.sandbox.manifests), install their own CRDs
and admission webhooks from the same module version, and run them out-of-cluster with
every port on loopback.

Each operator's webhook server gets a serving certificate for 127.0.0.1 signed by the
sandbox CA (or, for an always-on rotator, one it accepts: webhook.sandbox.rotators), and
its webhook configurations (the module's own manifests, with kustomize's patches) point
at that loopback URL with the CA as caBundle, as Airlock's do.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
import string
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.certificates import Authority, write_file
from webhook.sandbox import gobuilding, wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.launching import SETPRIV, free_port, stop_process_group, tail
from webhook.sandbox.manifests import crds, ensure_manifests, webhook_configurations
from webhook.sandbox.operators import Operator, OperatorError
from webhook.sandbox.rotators import ROTATOR_MOUNT, ROTATOR_SECRET, rotator_secret

Progress = Callable[[str], None]


# --- building ---------------------------------------------------------------------------

def ensure_operator(op: Operator, progress: Progress) -> None:
    """Its binaries, and its manifests copied from the module's source beside them, so a
    later start needs neither Go nor the module cache."""
    try:
        gobuilding.ensure(op.tool, progress)
    except gobuilding.BuildError as e:
        raise OperatorError(f"{op.name} failed to build (log: {op.tool.log}): {e}") from e
    ensure_manifests(op)


def build_operators(ops: list[Operator], progress: Progress) -> list[Operator]:
    """Each operator once (a name given twice is one operator), built or from the cache,
    before anything starts: a build that fails then leaves nothing to stop."""
    unique = list({op.name: op for op in ops}.values())
    for op in unique:
        ensure_operator(op, progress)
    return unique


# --- running ----------------------------------------------------------------------------

@dataclass
class RunningCommand:
    name: str  # "<operator>/<binary>", or the operator's name when it has one process
    process: subprocess.Popen[bytes]
    log: Path
    ready: str | None
    # The webhook paths it serves, as the apiserver will call them.
    webhooks: tuple[str, ...]


@dataclass
class _Prepared:
    op: Operator
    values: dict[str, str]
    env: dict[str, str]
    home: Path
    ca_pem: bytes
    # Its webhook configurations, pointed at its loopback server (none without webhooks).
    webhooks: list[dict[str, Any]]
    secret: dict[str, bytes] | None = None


def _prepare(op: Operator, workdir: Path, kubeconfig: Path, ca: Authority) -> _Prepared:
    home = workdir / op.name
    tmp = home / "tmp"  # controller-runtime's default certificate paths live under it
    certs = tmp / "k8s-webhook-server" / "serving-certs"
    certs.mkdir(parents=True, exist_ok=True)
    values = {"kubeconfig": str(kubeconfig), "certs": str(certs), "config": "",
              "webhook_port": str(free_port()), "metrics_port": str(free_port()),
              "health_port": str(free_port())}
    ca_pem, secret = ca.pem, None
    if op.rotator_namespace is not None:
        secret, ca_pem = rotator_secret(op.rotator_namespace)
        cert, key = secret["tls.crt"], secret["tls.key"]
    else:
        cert, key = ca.issue(f"{op.name}-webhook", hosts=("127.0.0.1",))
    write_file(certs / "tls.crt", cert)
    write_file(certs / "tls.key", key, private=True)
    for fixed in map(Path, op.fixed_cert_dirs):
        fixed_cert, fixed_key = ca.issue(f"{op.name}-fixed", hosts=("127.0.0.1",))
        fixed.mkdir(parents=True, exist_ok=True)
        write_file(fixed / "tls.crt", fixed_cert)
        write_file(fixed / "tls.key", fixed_key, private=True)
    if op.config is not None:
        config = home / "config.yaml"
        config.write_text(string.Template(op.config).substitute(values))
        values["config"] = str(config)
    webhooks = webhook_configurations(op, f"https://127.0.0.1:{values['webhook_port']}",
                                      ca_pem) if op.webhooks else []
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "TMPDIR": str(tmp)}
    return _Prepared(op, values, env, home, ca_pem, webhooks, secret)


async def _create_crd(extensions: client.ApiextensionsV1Api, op: Operator,
                      crd: dict[str, Any]) -> None:
    try:
        # Not read back: the client's models take seconds over a megabyte of schema.
        await extensions.create_custom_resource_definition(body=crd, _preload_content=False)
    except ApiException as e:
        if e.status != 409:
            raise OperatorError(f"{op.name}: CRD {crd['metadata']['name']}: {e.reason}") from e


async def _give_rotator_its_secret(core: client.CoreV1Api, ns: str,
                                   secret: dict[str, bytes]) -> None:
    with contextlib.suppress(ApiException):
        await core.create_namespace(body={"metadata": {"name": ns}})
    body = {"metadata": {"name": ROTATOR_SECRET},
            "data": {k: base64.b64encode(v).decode() for k, v in secret.items()}}
    await wiring.create_or_replace(
        lambda: core.create_namespaced_secret(ns, body=body),
        lambda: core.replace_namespaced_secret(ROTATOR_SECRET, ns, body=body))


async def _apply(api: client.ApiClient, prepared: list[_Prepared]) -> None:
    """Every operator's CRDs, rotator Secret and webhook configurations at once: the
    apiserver takes seconds over each large CRD, and one after another adds up."""
    extensions = client.ApiextensionsV1Api(api)
    steps: list[Coroutine[Any, Any, None]] = []
    installed: list[dict[str, Any]] = []
    for p in prepared:
        for crd in crds(p.op):
            installed.append(crd)
            steps.append(_create_crd(extensions, p.op, crd))
        if p.secret is not None and p.op.rotator_namespace is not None:
            steps.append(_give_rotator_its_secret(client.CoreV1Api(api),
                                                  p.op.rotator_namespace, p.secret))
        if p.webhooks:
            steps.append(wiring.apply_webhook_configurations(api, p.webhooks))
    await asyncio.gather(*steps)
    await _served(api, installed)


async def install_crds(api: client.ApiClient, docs: list[dict[str, Any]]) -> None:
    """CRDs created (one there already is left as it is), back once all are served."""
    extensions = client.ApiextensionsV1Api(api)
    for crd in docs:
        try:
            await extensions.create_custom_resource_definition(body=crd)
        except ApiException as e:
            if e.status != 409:
                raise
    await _served(api, docs)


async def _served(api: client.ApiClient, docs: list[dict[str, Any]],
                  within: float = 60.0) -> None:
    """Until discovery lists every CRD's resource. Reading the CRDs back for their
    Established condition would fetch megabytes per poll from a busy apiserver."""
    wanted: dict[str, set[str]] = {}
    for crd in docs:
        spec = crd["spec"]
        for version in spec["versions"]:
            if version.get("served", True):
                wanted.setdefault(f"/apis/{spec['group']}/{version['name']}", set()).add(
                    spec["names"]["plural"])
    deadline = time.monotonic() + within

    async def listed(path: str) -> set[str]:
        response = await api.call_api(path, "GET", _preload_content=False,
                                      _return_http_data_only=True,
                                      auth_settings=["BearerToken"])
        if response.status != 200:  # a group-version not served yet answers 404
            return set()
        return {r["name"] for r in (await response.json()).get("resources") or []}

    while wanted:
        found = await asyncio.gather(*(listed(path) for path in wanted))
        wanted = {path: plurals - have for (path, plurals), have
                  in zip(wanted.items(), found, strict=True) if plurals - have}
        if wanted and time.monotonic() > deadline:
            raise OperatorError(f"CRDs not served after {within:g}s: "
                                f"{', '.join(f'{p} {sorted(r)}' for p, r in wanted.items())}")
        if wanted:
            await asyncio.sleep(0.2)


def _spawn(p: _Prepared, detached: bool) -> list[RunningCommand]:
    running = []
    for command in p.op.commands:
        binary = p.op.tool.binary(command.binary)
        argv = [str(binary), *(string.Template(a).substitute(p.values) for a in command.args)]
        if not detached and SETPRIV:
            # As the control plane's own processes: no operator outlives a killed test run.
            argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        log = p.home / f"{command.binary}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True,
                                    env={**p.env, **command.env})
        ready = string.Template(command.ready).substitute(p.values) if command.ready else None
        name = p.op.name if len(p.op.commands) == 1 else f"{p.op.name}/{command.binary}"
        webhooks = tuple(hook["clientConfig"]["url"] for doc in p.webhooks
                         for hook in doc["webhooks"]) if command is p.op.commands[0] else ()
        running.append(RunningCommand(name, proc, log, ready, webhooks))
    return running


def _answers(url: str, context: ssl.SSLContext | None = None) -> bool:
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as r:
            return bool(r.status == 200)
    except urllib.error.HTTPError as e:
        # A webhook path answers a GET with an error (no review in it): its handler is
        # there, which is the question. 404 is a server up with the path not yet
        # registered: the training-operator registers its webhooks in a goroutine after
        # its readiness check passes, and the apiserver then fails every PyTorchJob.
        return context is not None and e.code != 404
    except (urllib.error.URLError, OSError):
        return False


def _wait(running: list[RunningCommand], cas: dict[str, bytes], timeout: float) -> None:
    contexts = {name: ssl.create_default_context(cadata=pem.decode())
                for name, pem in cas.items()}
    pending = {r.name: r for r in running}
    deadline = time.monotonic() + timeout
    while pending:
        for name, r in list(pending.items()):
            if r.process.poll() is not None:
                raise OperatorError(
                    f"operator {name} exited with {r.process.returncode}; log: {r.log}\n"
                    f"{tail(r.log, 15)}")
            ok = r.ready is None or _answers(r.ready)
            if ok and r.webhooks:
                context = contexts[name.split("/")[0]]
                ok = all(_answers(url, context) for url in r.webhooks)
            if ok:
                del pending[name]
        if not pending:
            return
        if time.monotonic() > deadline:
            names = ", ".join(f"{n} (log: {r.log})" for n, r in pending.items())
            raise OperatorError(f"operator not ready after {timeout:g}s: {names}")
        time.sleep(0.2)


def start_operators(ops: list[Operator], workdir: Path, kubeconfig: Path, ca: Authority,
                    progress: Progress, detached: bool = False,
                    timeout: float = 90.0) -> list[RunningCommand]:
    """Build (once), install and start `ops`; back once each is ready and its webhooks
    serve. On any failure, what this started is stopped before the error propagates."""
    build_operators(ops, progress)
    prepared = [_prepare(op, workdir / "operators", kubeconfig, ca) for op in ops]

    async def apply() -> None:
        async with await from_kubeconfig(kubeconfig) as api:
            await _apply(api, prepared)

    asyncio.run(apply())
    if any(p.secret is not None for p in prepared) and not ROTATOR_MOUNT.exists():
        ROTATOR_MOUNT.parent.mkdir(parents=True, exist_ok=True)
        write_file(ROTATOR_MOUNT, next(p.secret for p in prepared if p.secret)["tls.crt"])
    running: list[RunningCommand] = []
    try:
        for p in prepared:
            running += _spawn(p, detached)
        _wait(running, {p.op.name: p.ca_pem for p in prepared}, timeout)
    except BaseException:
        stop(running)
        raise
    return running


def stop(running: list[RunningCommand]) -> None:
    for r in reversed(running):
        stop_process_group(r.process.pid)
        with contextlib.suppress(subprocess.TimeoutExpired):
            r.process.wait(timeout=5)
