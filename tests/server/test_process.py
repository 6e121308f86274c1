"""`airlock serve` as a process: it starts from the command line, refuses to start
without a certificate, and drains in-flight requests on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests.builders import pod, review
from tests.commands import airlock_command, run_airlock
from tests.paths import POLICIES
from webhook.certificates import make_certs
from webhook.sandbox.launching import free_port


def wait_ready(port: int, ca: Path, proc: subprocess.Popen[bytes]) -> None:
    ctx = ssl.create_default_context(cafile=str(ca))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as raw, \
                    ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                if tls.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("webhook did not become ready")


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    certs = make_certs(tmp_path / "certs")
    port = free_port()
    proc = subprocess.Popen(
        airlock_command("serve", "--host", "127.0.0.1", "--port", str(port),
                        "--cert-dir", str(tmp_path / "certs"), "--policies", str(POLICIES),
                        "--drain-seconds", "1.5"),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_ready(port, certs.ca, proc)
        yield proc, port, certs.ca
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


async def test_sigterm_drains_an_in_flight_request(
        served: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    """A request under way when SIGTERM arrives completes; the server then reports
    not-ready while it drains, and exits 0."""
    proc, port, ca = served
    body = orjson.dumps(review(pod().gpus(1).owner("Job", "j").build()))
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=ssl.create_default_context(cafile=str(ca)))
    head = (f"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode()
    writer.write(head + body[:100])
    await writer.drain()
    await asyncio.sleep(0.3)
    proc.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.5)
    assert proc.poll() is None, "the server must wait for the request under way"
    writer.write(body[100:])
    await writer.drain()
    status = await asyncio.wait_for(reader.readline(), 10)
    assert status.startswith(b"HTTP/1.1 200")
    writer.close()
    ctx = ssl.create_default_context(cafile=str(ca))
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    writer.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    assert (await reader.read()).startswith(b"HTTP/1.1 503")
    assert await asyncio.to_thread(proc.wait, 20) == 0


def test_logs_are_json_lines(served: tuple[subprocess.Popen[bytes], int, Path]) -> None:
    proc, _, _ = served
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=20)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert lines
    for line in lines:
        record = orjson.loads(line)
        assert {"time", "level", "logger", "msg"} <= set(record)


def test_missing_certificate_is_a_clear_error(tmp_path: Path) -> None:
    out = run_airlock("serve", "--port", str(free_port()), "--cert-dir",
                      str(tmp_path / "nowhere"), "--policies", str(POLICIES), timeout=30)
    assert out.returncode == 1
    assert "tls.crt" in out.stderr
    assert "missing" in out.stderr
