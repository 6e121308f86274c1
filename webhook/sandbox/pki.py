"""The control plane's certificates and kubeconfigs: one CA for serving and for client
certificates (CN = user, O = groups), and a key pair for service-account tokens."""

from __future__ import annotations

import base64
import datetime
from dataclasses import dataclass
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certificates import pem_key, san


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


@dataclass(frozen=True, slots=True)
class KeyPair:
    cert: Path
    key: Path


class Pki:
    def __init__(self, directory: Path) -> None:
        self.dir = directory
        directory.mkdir(parents=True, exist_ok=True)
        self.ca_file = directory / "ca.crt"
        self._now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        self._ca_key = ec.generate_private_key(ec.SECP256R1())
        self._ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "airlock-sandbox-ca")])
        self._ca = (
            x509.CertificateBuilder().subject_name(self._ca_name).issuer_name(self._ca_name)
            .public_key(self._ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self._now)
            .not_valid_after(self._now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._ca_key, hashes.SHA256())
        )
        self.ca_file.write_bytes(self._ca.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str, common_name: str, groups: tuple[str, ...] = (),
              hosts: tuple[str, ...] = ()) -> KeyPair:
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        builder = (
            x509.CertificateBuilder().subject_name(x509.Name(subject))
            .issuer_name(self._ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(self._now)
            .not_valid_after(self._now + datetime.timedelta(days=30))
            .add_extension(x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([san(h) for h in hosts]), critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        pair = KeyPair(self.dir / f"{name}.crt", self.dir / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(pem_key(key))
        pair.key.chmod(0o600)
        return pair

    def service_account_keys(self) -> KeyPair:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pair = KeyPair(self.dir / "sa.pub", self.dir / "sa.key")
        pair.key.write_bytes(pem_key(key))
        pair.cert.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
        return pair

    def kubeconfig(self, path: Path, server: str, user: str,
                   groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig that authenticates as `user` in `groups` by client certificate."""
        safe = user.replace(":", "_").replace("/", "_")
        pair = self.issue(f"client-{safe}", user, groups)
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "sandbox",
            "clusters": [{"name": "sandbox", "cluster": {
                "server": server, "certificate-authority-data": _b64(self.ca_file)}}],
            "users": [{"name": user, "user": {
                "client-certificate-data": _b64(pair.cert),
                "client-key-data": _b64(pair.key)}}],
            "contexts": [{"name": "sandbox", "context": {"cluster": "sandbox", "user": user}}],
        }
        path.write_text(yaml.safe_dump(config))
        path.chmod(0o600)
        return path
