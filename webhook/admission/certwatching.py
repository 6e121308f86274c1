"""The serving certificate, reloaded when its directory changes.

cert-manager renews into a Secret; the kubelet swaps the mounted directory's `..data`
symlink, so the files' resolved paths and times change together. Polling that
fingerprint is immune to the watch being lost in the swap. The new pair is loaded into
the live SSLContext: handshakes already under way keep the old one, new ones get the new
one, and no connection is dropped.
"""

from __future__ import annotations

import datetime
import logging
import ssl
from collections.abc import Callable
from pathlib import Path

from webhook.certificates import CERT_FILE, KEY_FILE, not_after
from webhook.fingerprints import Fingerprint, fingerprint

log = logging.getLogger("airlock.certs")

class CertWatcher:
    def __init__(self, cert_dir: Path,
                 clock: Callable[[], datetime.datetime] = lambda: datetime.datetime.now(
                     datetime.UTC)) -> None:
        self.cert = cert_dir / CERT_FILE
        self.key = cert_dir / KEY_FILE
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.minimum_version = ssl.TLSVersion.TLSv1_2
        self.not_after: datetime.datetime | None = None
        self.error: str | None = None
        self._clock = clock
        self._seen: Fingerprint | None = None
        self.reloads = 0

    def seconds_to_expiry(self) -> float:
        if self.not_after is None:
            return 0.0
        return (self.not_after - self._clock()).total_seconds()

    def problem(self) -> str | None:
        """Why the webhook cannot serve well, or None."""
        if self.error:
            return self.error
        if self.not_after is not None and self.seconds_to_expiry() <= 0:
            return f"certificate {self.cert} expired at {self.not_after.isoformat()}"
        return None

    def reload_if_changed(self) -> bool:
        """Load the pair if the files changed; True when a new pair went live. A broken
        pair (half-written, mismatched) keeps the one in use and is reported."""
        seen = fingerprint((self.cert, self.key))
        if seen == self._seen:
            return False
        self._seen = seen
        if any(stamp.problem for stamp in seen):
            self.error = f"{self.cert} or {self.key} is missing"
            log.error("certificate reload failed", extra={"error": self.error})
            return False
        try:
            cert_pem = self.cert.read_bytes()
            # Check the pair on a scratch context first, so a bad pair never replaces a
            # good one on the live context.
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(self.cert, self.key)
            self.context.load_cert_chain(self.cert, self.key)
            self.not_after = not_after(cert_pem)
        except (OSError, ssl.SSLError, ValueError) as e:
            self.error = f"cannot load {self.cert} and {self.key}: {e}"
            log.error("certificate reload failed", extra={"error": self.error})
            return False
        self.error = None
        self.reloads += 1
        if self.seconds_to_expiry() <= 0:
            log.error("certificate is expired", extra={"not_after": self.not_after.isoformat()})
        else:
            log.info("certificate loaded", extra={"not_after": self.not_after.isoformat()})
        return True
