"""Development certificates: a CA and a serving certificate signed by it.

Production clusters get theirs from cert-manager (deploy/); this is for `airlock serve`
on a laptop, the sandbox and the tests. Files use the names of a cert-manager Secret.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import secrets
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


def _write(path: Path, data: bytes, private: bool = False) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_bytes(data)
    if private:
        tmp.chmod(0o600)
    os.replace(tmp, path)


def make_certs(out: Path, hosts: tuple[str, ...] = SERVICE_HOSTS, days: int = 365,
               not_before: datetime.datetime | None = None) -> CertFiles:
    """Write ca.crt, tls.crt and tls.key into `out`. `not_before` lets tests make
    certificates that are already expired."""
    out.mkdir(parents=True, exist_ok=True)
    start = not_before or datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    end = start + datetime.timedelta(days=days)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    # A unique name per CA: a trust bundle holding the old and the new CA during a
    # rotation must tell them apart by subject.
    ca_name = x509.Name([x509.NameAttribute(
        NameOID.COMMON_NAME, f"airlock-dev-ca-{secrets.token_hex(4)}")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name).issuer_name(ca_name)
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False,
                                     data_encipherment=False, key_agreement=False,
                                     encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
        .issuer_name(ca_name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName([san(h) for h in hosts]), critical=False)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    files = CertFiles(out / CA_FILE, out / CERT_FILE, out / KEY_FILE)
    _write(files.ca, ca.public_bytes(serialization.Encoding.PEM))
    _write(files.key, pem_key(key), private=True)
    _write(files.cert, cert.public_bytes(serialization.Encoding.PEM))
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
