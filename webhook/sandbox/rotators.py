"""The training-operator's always-on certificate rotator (cert-controller, in v1.9.2,
which has no switch for it): the Secret it accepts as it is, so it never regenerates a
certificate the loopback URL would not match, and the path it checks before it starts.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from webhook.certificates import san

ROTATOR_SECRET = "training-operator-webhook-cert"
ROTATOR_CA_NAME = "training-operator-ca"
# cert-controller's rotator stats this very path before it starts any controller; the
# server itself reads $TMPDIR/k8s-webhook-server/serving-certs.
ROTATOR_MOUNT = Path("/tmp/k8s-webhook-server/serving-certs/tls.crt")


def rotator_secret(namespace: str) -> tuple[dict[str, bytes], bytes]:
    """The Secret the training-operator's rotator accepts as it is, and the CA to trust.

    The rotator regenerates (for `training-operator.<ns>.svc` only, so not for the
    loopback URL) unless ca.crt/ca.key (an RSA key in PKCS#1) verify as a CA for the DNS
    name `training-operator-ca` and tls.crt verifies under it, 90 days ahead. The sandbox
    CA can be neither, so this is a CA of its own, for the one operator.
    """
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    end = now + datetime.timedelta(days=365)
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ROTATOR_CA_NAME)])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now).not_valid_after(end)
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.SubjectAlternativeName([san(ROTATOR_CA_NAME)]), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    hosts = (f"training-operator.{namespace}.svc", "127.0.0.1")
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0])]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([san(h) for h in hosts]),
                           critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    ca_pem = ca.public_bytes(pem)
    data = {
        "ca.crt": ca_pem,
        "ca.key": ca_key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                       serialization.NoEncryption()),
        "tls.crt": cert.public_bytes(pem),
        "tls.key": key.private_bytes(pem, serialization.PrivateFormat.TraditionalOpenSSL,
                                     serialization.NoEncryption()),
    }
    return data, ca_pem

