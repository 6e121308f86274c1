"""The control plane's certificates and kubeconfigs: one CA for serving and for client
certificates (CN = user, O = groups), and a key pair for service-account tokens."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from webhook.certificates import Authority, pem_key, write_file


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert: Path
    key: Path


def write_kubeconfig(path: Path, server: str, ca_pem: bytes, user: str, *,
                     client: KeyPair | None = None, token: str | None = None) -> Path:
    """A kubeconfig for `server` that authenticates as `user` by a client certificate or
    a bearer token."""
    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    if token is not None:
        credentials = {"token": token}
    elif client is not None:
        credentials = {"client-certificate-data": b64(client.cert.read_bytes()),
                       "client-key-data": b64(client.key.read_bytes())}
    else:
        raise ValueError("a kubeconfig needs a client certificate or a token")
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": user,
        "clusters": [{"name": "sandbox", "cluster": {
            "server": server, "certificate-authority-data": b64(ca_pem)}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": user, "context": {"cluster": "sandbox", "user": user}}],
    }
    write_file(path, yaml.safe_dump(config).encode(), private=True)
    return path


class Pki:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca = Authority("airlock-sandbox-ca", days=30)
        self.ca_file = directory / "ca.crt"
        self.ca_file.write_bytes(self.ca.pem)
        # kube-controller-manager signs CertificateSigningRequests with it.
        self.ca_key_file = directory / "ca.key"
        write_file(self.ca_key_file, pem_key(self.ca.key), private=True)

    def issue(self, name: str, common_name: str, groups: tuple[str, ...] = (),
              hosts: tuple[str, ...] = ()) -> KeyPair:
        cert, key = self.ca.issue(common_name, hosts=hosts, groups=groups)
        pair = KeyPair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(cert)
        write_file(pair.key, key, private=True)
        return pair

    def service_account_keys(self) -> KeyPair:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pair = KeyPair(self.dir / "sa.pub", self.dir / "sa.key")
        write_file(pair.key, pem_key(key), private=True)
        pair.cert.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        return pair

    def kubeconfig(self, path: Path, server: str, user: str,
                   groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig that authenticates as `user` in `groups` by client certificate."""
        safe = user.replace(":", "_").replace("/", "_")
        pair = self.issue(f"client-{safe}", user, groups)
        return write_kubeconfig(path, server, self.ca.pem, user, client=pair)
