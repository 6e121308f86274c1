"""The webhook server as tests run it: in-process, over real TLS on loopback, with its
certificate and policy directories laid out the way the kubelet mounts a Secret and a
ConfigMap (`..data` symlinks), so a test can rotate either the way a cluster does."""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from tests.paths import POLICIES
from webhook.admission.serving import (
    RELOAD_INTERVAL,
    Listening,
    WebhookServer,
    build_server,
    listen,
)
from webhook.certificates import make_certs


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


def policy_files(src: Path = POLICIES) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(src.glob("*.yaml"))}


@dataclass
class MountedServer:
    """A webhook server (not yet listening) over kubelet-style mounts in a scratch dir."""

    server: WebhookServer
    certs: KubeletDir
    policies: KubeletDir
    ca: Path
    # Set by `listen`.
    url: str = ""

    @classmethod
    def make(cls, tmp: Path, reload_interval: float = RELOAD_INTERVAL) -> MountedServer:
        certs = KubeletDir(tmp / "certs")
        files = cert_files(tmp / "gen")
        certs.publish(files)
        ca = tmp / "ca.crt"
        ca.write_bytes(files["ca.crt"])
        policies = KubeletDir(tmp / "policies")
        policies.publish(policy_files())
        return cls(build_server(certs.path, policies.path, reload_interval), certs, policies,
                   ca)

    def client_context(self, ca: Path | None = None) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(ca or self.ca))

    async def listen(self, port: int = 0) -> Listening:
        """Serve on loopback (`port` 0: any free one)."""
        listening = await listen(self.server, "127.0.0.1", port)
        self.url = f"https://127.0.0.1:{listening.port}"
        return listening
