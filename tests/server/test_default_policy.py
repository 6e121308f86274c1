"""`airlock serve` started where there is no policies/ and no --policies loads the default
policy shipped in the package, says so, and serves."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import orjson

from tests.commands import airlock_command
from webhook.certificates import make_certs


def test_serve_uses_the_shipped_policy_outside_a_checkout(tmp_path: Path) -> None:
    make_certs(tmp_path / "certs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        airlock_command("serve", "--host", "127.0.0.1", "--port", str(port),
                        "--cert-dir", str(tmp_path / "certs"), "--drain-seconds", "0"),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        note = proc.stderr.readline()
        assert "using the default policy shipped with Airlock" in note
        deadline = time.monotonic() + 20
        events: dict[str, dict[str, object]] = {}
        while "serving" not in events and time.monotonic() < deadline:
            line = proc.stderr.readline()
            assert line, "serve exited before serving"
            record = orjson.loads(line)
            events[str(record["msg"])] = record
        loaded = events["policy loaded"]
        assert str(loaded["directory"]).endswith("webhook/policy/defaults")
        assert loaded["rules"]
        assert events["serving"]["port"] == port
    finally:
        proc.terminate()
        proc.wait(timeout=20)
