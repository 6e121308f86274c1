from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509

from tests.commands import airlock
from webhook.certificates import SERVICE_HOSTS, ensure_dev_certs, make_certs


def test_serving_certificate_is_signed_by_the_ca_with_service_sans(tmp_path: Path) -> None:
    files = make_certs(tmp_path)
    ca = x509.load_pem_x509_certificate(files.ca.read_bytes())
    cert = x509.load_pem_x509_certificate(files.cert.read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "airlock-webhook.airlock-system.svc" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("127.0.0.1") in sans.get_values_for_type(x509.IPAddress)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert oct(files.key.stat().st_mode & 0o777) == "0o600"


def test_dev_certificates_are_reused_until_they_near_expiry(tmp_path: Path) -> None:
    first = ensure_dev_certs(tmp_path).cert.read_bytes()
    assert ensure_dev_certs(tmp_path).cert.read_bytes() == first
    soon = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=364, hours=12)
    make_certs(tmp_path, days=365, not_before=soon)
    expiring = (tmp_path / "tls.crt").read_bytes()
    assert ensure_dev_certs(tmp_path).cert.read_bytes() != expiring


def test_certs_command_adds_extra_hosts(tmp_path: Path) -> None:
    out = airlock("certs", "--out", str(tmp_path),
                  "--host", "webhook.example.internal", "--host", "10.0.0.7")
    assert out.returncode == 0, out.stderr
    assert "wrote" in out.stdout
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "webhook.example.internal" in sans.get_values_for_type(x509.DNSName)
    assert ipaddress.ip_address("10.0.0.7") in sans.get_values_for_type(x509.IPAddress)
    assert set(SERVICE_HOSTS) - {"127.0.0.1"} <= set(sans.get_values_for_type(x509.DNSName))
