"""Starting the sandbox's processes and telling when they serve: a free loopback port
for each, a session of its own with its output in a log, readiness polled over HTTP(S);
and stopping them by process group, also from a later command that knows only their
pids (`airlock sandbox down`, `restart`)."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

# util-linux, on virtually every Linux; without it only atexit and teardown stop the plane.
SETPRIV = shutil.which("setpriv")


class ControlPlaneError(RuntimeError):
    pass


def tail(log: Path, lines: int) -> str:
    """The last lines of a component's log, for error messages."""
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


# Ports handed out by this process: each goes to one component.
_GIVEN: set[int] = set()
_LOWEST = 10000


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A loopback port nothing listens on, for a component to bind a moment later. It is
    taken from below the kernel's ephemeral range: outgoing connections (dozens between
    the components) take their local ports from that range, and one of them grabbing the
    port in that moment made an operator fail with `address already in use`."""
    top = _ephemeral_start()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(_LOWEST, top) if top > _LOWEST else 0
        if port in _GIVEN:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            bound: int = s.getsockname()[1]
        _GIVEN.add(bound)
        return bound
    raise RuntimeError("no free loopback port below the ephemeral range")


def launch(argv: list[str], log: Path, append: bool = False,
           session: bool = True) -> subprocess.Popen[bytes]:
    """A component, by default in a session and process group of its own (stopped with
    its children, and out of reach of a terminal's Ctrl-C), its output in `log`:
    truncated for a new plane, appended to when it is restarted in place."""
    with log.open("ab" if append else "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=session)


def answers(url: str, context: ssl.SSLContext | None = None) -> bool:
    """Whether `url` answers 200. Loopback readiness: without a `context` the serving
    certificate is not checked (the schedulers' are self-signed; the apiserver lets
    anyone read its /readyz)."""
    if context is None:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(url, context=context, timeout=2) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def wait_ready(name: str, process: subprocess.Popen[bytes] | int, log: Path, url: str,
               timeout: float = 60.0, context: ssl.SSLContext | None = None,
               since: float | None = None) -> float:
    """Wait for a component (a child, or a pid another process started, as `sandbox
    restart` does) to answer `url` within `timeout` seconds of `since` (default: now);
    the seconds that took. It exiting or not answering in time is an error that quotes
    its log."""
    started = time.monotonic() if since is None else since
    while time.monotonic() - started < timeout:
        code = process.poll() if isinstance(process, subprocess.Popen) else \
            (None if alive(process) else "?")
        if code is not None:
            raise ControlPlaneError(f"{name} exited with {code}; last lines of {log}:\n"
                                    f"{tail(log, 25)}")
        if not url or answers(url, context):
            return time.monotonic() - started
        time.sleep(0.1)
    raise ControlPlaneError(f"{name} not ready at {url} after {timeout:.0f}s; last lines "
                            f"of {log}:\n{tail(log, 25)}")


def alive(pid: int) -> bool:
    """Running, and not a zombie nobody reaped (a container's PID 1 may not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def stop_process_group(pid: int, grace: float = 5.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after `grace`."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pid, 0)
        except (ProcessLookupError, PermissionError):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
