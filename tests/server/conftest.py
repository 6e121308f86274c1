"""A real webhook server over real TLS on loopback, with its cert and policy dirs laid
out the way the kubelet mounts a Secret and a ConfigMap (`..data` symlinks)."""

from __future__ import annotations

import os
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from webhook.admission.serving import WebhookServer, build_server
from webhook.certificates import make_certs

ROOT = Path(__file__).resolve().parents[2]


class KubeletDir:
    """A directory mounted the kubelet's way: files are links through `..data`, and an
    update swaps `..data` atomically to a new timestamped directory."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.generation = 0
        path.mkdir(parents=True)

    def publish(self, files: dict[str, bytes]) -> None:
        self.generation += 1
        version = self.path / f"..2026_11_22_{self.generation:04d}"
        version.mkdir()
        for name, data in files.items():
            (version / name).write_bytes(data)
        tmp = self.path / "..data_tmp"
        tmp.symlink_to(version.name)
        os.replace(tmp, self.path / "..data")
        for name in files:
            link = self.path / name
            if not link.is_symlink():
                link.symlink_to(f"..data/{name}")


def cert_files(tmp: Path) -> dict[str, bytes]:
    files = make_certs(tmp)
    return {"tls.crt": files.cert.read_bytes(), "tls.key": files.key.read_bytes(),
            "ca.crt": files.ca.read_bytes()}


def policy_files(src: Path = ROOT / "policies") -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(src.glob("*.yaml"))}


@dataclass
class RunningServer:
    server: WebhookServer
    url: str
    certs: KubeletDir
    policies: KubeletDir
    ca: Path

    def client_context(self, ca: Path | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(ca or self.ca))


@pytest.fixture
async def running(tmp_path: Path, unused_tcp_port: int) -> AsyncIterator[RunningServer]:
    certs = KubeletDir(tmp_path / "certs")
    files = cert_files(tmp_path / "gen")
    certs.publish(files)
    (tmp_path / "ca.crt").write_bytes(files["ca.crt"])
    policies = KubeletDir(tmp_path / "policies")
    policies.publish(policy_files())
    server = build_server(certs.path, policies.path, reload_interval=0.1)
    runner = web.AppRunner(server.app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", unused_tcp_port, ssl_context=server.certs.context)
    await site.start()
    try:
        yield RunningServer(server, f"https://127.0.0.1:{unused_tcp_port}", certs, policies,
                            tmp_path / "ca.crt")
    finally:
        await runner.cleanup()


@pytest.fixture
async def session(running: RunningServer) -> AsyncIterator[aiohttp.ClientSession]:
    connector = aiohttp.TCPConnector(ssl=running.client_context())
    async with aiohttp.ClientSession(connector=connector) as s:
        yield s

