"""Development certificates: a CA and a serving certificate signed by it.

Production clusters get theirs from cert-manager (deploy/); this is for `airlock serve`
on a laptop, the sandbox and the tests. Files use the names of a cert-manager Secret.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

SERVICE_HOSTS = (
    "airlock-webhook",
    "airlock-webhook.airlock-system",
    "airlock-webhook.airlock-system.svc",
    "airlock-webhook.airlock-system.svc.cluster.local",
    "localhost",
    "127.0.0.1",
)
CA_FILE, CERT_FILE, KEY_FILE = "ca.crt", "tls.crt", "tls.key"


@dataclass(frozen=True, slots=True)
class CertFiles:
    ca: Path
    cert: Path
    key: Path


def pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def san(host: str) -> x509.GeneralName:
    """A DNS name or an IP address, as a subjectAltName entry."""
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)


def write_file(path: Path, data: bytes, private: bool = False) -> None:
    """Replace `path` at once (readers never see half a file), owner-only if private. The
    temporary file's name is the writer's own: two processes filling one cache (a test run
    and a sandbox) must not rename each other's file away."""
    tmp = path.with_suffix(f"{path.suffix}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_bytes(data)
    if private:
        tmp.chmod(0o600)
    os.replace(tmp, path)


class Authority:
    """A CA, kept in memory, that signs serving certificates (for `hosts`) and client
    certificates (CN = user, O = groups, as the apiserver reads them)."""

    def __init__(self, name: str, days: int = 365,
                 not_before: datetime.datetime | None = None) -> None:
        self.start = not_before or \
            datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
        self.end = self.start + datetime.timedelta(days=days)
        self.key = ec.generate_private_key(ec.SECP256R1())
        # A unique name per CA: a trust bundle holding the old and the new CA during a
        # rotation must tell them apart by subject.
        self.name = x509.Name([x509.NameAttribute(
            NameOID.COMMON_NAME, f"{name}-{secrets.token_hex(4)}")])
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(self.name).issuer_name(self.name)
            .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.end)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False),
                critical=True)
            .sign(self.key, hashes.SHA256())
        )

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def issue(self, common_name: str, hosts: tuple[str, ...] = (),
              groups: tuple[str, ...] = ()) -> tuple[bytes, bytes]:
        """(certificate, key) as PEM: for serving when `hosts` are given, else a client."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        subject += [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        usage = ExtendedKeyUsageOID.SERVER_AUTH if hosts else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(subject)).issuer_name(self.name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.start).not_valid_after(self.end)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        )
        if hosts:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([san(h) for h in hosts]), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), pem_key(key)


def make_certs(out: Path, hosts: tuple[str, ...] = SERVICE_HOSTS, days: int = 365,
               not_before: datetime.datetime | None = None) -> CertFiles:
    """Write ca.crt, tls.crt and tls.key into `out`. `not_before` lets tests make
    certificates that are already expired."""
    out.mkdir(parents=True, exist_ok=True)
    ca = Authority("airlock-dev-ca", days, not_before)
    cert, key = ca.issue(hosts[0], hosts=hosts)
    files = CertFiles(out / CA_FILE, out / CERT_FILE, out / KEY_FILE)
    write_file(files.ca, ca.pem)
    write_file(files.key, key, private=True)
    write_file(files.cert, cert)
    return files


def not_after(cert_pem: bytes) -> datetime.datetime:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc


def ensure_dev_certs(out: Path) -> CertFiles:
    """Reuse the development certificates in `out` while they are valid for a day more."""
    files = CertFiles(out / CA_FILE, out / CERT_FILE, out / KEY_FILE)
    if files.cert.exists() and files.key.exists() and files.ca.exists():
        remaining = not_after(files.cert.read_bytes()) - datetime.datetime.now(datetime.UTC)
        if remaining > datetime.timedelta(days=1):
            return files
    return make_certs(out)


def run_certs(out: Path, hosts: list[str] | None) -> int:
    all_hosts = SERVICE_HOSTS + tuple(h for h in (hosts or []) if h not in SERVICE_HOSTS)
    files = make_certs(out, all_hosts)
    print(f"wrote {files.ca}, {files.cert}, {files.key} (SANs: {', '.join(all_hosts)})")
    return 0
