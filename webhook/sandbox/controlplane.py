"""A real control plane on loopback: etcd, kube-apiserver (RBAC, default admission
plugins, service-account tokens) and kube-scheduler. No kubelet and no
controller-manager: nodes are API objects, and pods stay Pending once bound."""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from webhook.sandbox.binaries import Binaries
from webhook.sandbox.pki import Pki

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path

    def tail(self, lines: int = 25) -> str:
        return tail(self.log, lines)


@dataclass
class ControlPlane:
    binaries: Binaries
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="airlock-cp-")))
    # Detached planes outlive this process (the sandbox); others die with it.
    detached: bool = False
    components: list[Component] = field(default_factory=list)
    url: str = ""
    start_seconds: float = 0.0
    # Seconds each component took to become ready, for the start-time figure.
    timings: dict[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.pki = Pki(self.workdir / "pki")
        self.ca_file = self.pki.ca_file
        self.admin_kubeconfig = self.workdir / "admin.kubeconfig"

    # --- processes --------------------------------------------------------------
    def _spawn(self, name: str, argv: list[str]) -> Component:
        log = self.workdir / f"{name}.log"
        if not self.detached and SETPRIV:
            # atexit and fixture teardown cover exceptions and Ctrl-C, not a SIGKILL or a
            # CI timeout's SIGTERM; the kernel's parent-death signal covers those, so no
            # etcd or apiserver outlives the test run. (It fires when the *thread* that
            # started the plane exits: start() from a thread that lives as long.)
            argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        with log.open("wb") as out:
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        component = Component(name, proc, log)
        self.components.append(component)
        return component

    def _wait(self, component: Component, url: str, timeout: float,
              context: ssl.SSLContext | None) -> None:
        started = time.monotonic()
        deadline = started + timeout
        last = ""
        while time.monotonic() < deadline:
            if component.process.poll() is not None:
                raise ControlPlaneError(
                    f"{component.name} exited with {component.process.returncode}; last "
                    f"lines of {component.log}:\n{component.tail()}")
            try:
                with urllib.request.urlopen(url, context=context, timeout=2) as r:
                    if r.status == 200:
                        self.timings[component.name] = time.monotonic() - started
                        return
            except (urllib.error.URLError, OSError) as e:
                last = str(e)
            time.sleep(0.1)
        raise ControlPlaneError(f"{component.name} not ready at {url} after {timeout:.0f}s "
                                f"({last}); last lines of {component.log}:\n{component.tail()}")

    def _admin_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(self._admin.cert, self._admin.key)
        return ctx

    def start(self, timeout: float = 60.0) -> ControlPlane:
        started = time.monotonic()
        if not self.detached:
            atexit.register(self.stop)
        try:
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._start_scheduler(timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - started
        return self

    def _start_etcd(self, timeout: float) -> None:
        client, peer = free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client}"
        etcd = self._spawn("etcd", [
            str(self.binaries.etcd), "--data-dir", str(self.workdir / "etcd"),
            "--listen-client-urls", self.etcd_url, "--advertise-client-urls", self.etcd_url,
            "--listen-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{peer}",
            "--initial-cluster", f"default=http://127.0.0.1:{peer}",
            "--unsafe-no-fsync", "--log-level", "warn",
        ])
        self._wait(etcd, f"{self.etcd_url}/health", timeout, None)

    def _start_apiserver(self, timeout: float) -> None:
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        serving = self.pki.issue("apiserver", "kube-apiserver", hosts=(
            "127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        sa = self.pki.service_account_keys()
        self._admin = self.pki.issue("admin", "airlock-admin", ("system:masters",))
        apiserver = self._spawn("kube-apiserver", [
            str(self.binaries.kube_apiserver),
            "--etcd-servers", self.etcd_url,
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(port),
            "--tls-cert-file", str(serving.cert), "--tls-private-key-file", str(serving.key),
            "--client-ca-file", str(self.ca_file),
            "--authorization-mode", "Node,RBAC",
            "--service-cluster-ip-range", "10.0.0.0/24",
            "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
            "--service-account-key-file", str(sa.cert),
            "--service-account-signing-key-file", str(sa.key),
            "--allow-privileged=true",
            "--cert-dir", str(self.workdir / "apiserver-certs"),
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--v=1",
        ])
        self._wait(apiserver, f"{self.url}/readyz", timeout, self._admin_context())
        self.pki.kubeconfig(self.admin_kubeconfig, self.url, "airlock-admin",
                            ("system:masters",))

    def _start_scheduler(self, timeout: float) -> None:
        kubeconfig = self.pki.kubeconfig(self.workdir / "scheduler.kubeconfig", self.url,
                                         "system:kube-scheduler")
        port = free_port()
        scheduler = self._spawn("kube-scheduler", [
            str(self.binaries.kube_scheduler), "--kubeconfig", str(kubeconfig),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", str(port), "--v=1",
        ])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        self._wait(scheduler, f"https://127.0.0.1:{port}/healthz", timeout, insecure)

    def stop(self) -> None:
        for component in reversed(self.components):
            pid = component.process.pid
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGTERM)
            try:
                component.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                component.process.kill()
                component.process.wait()
            # Anything the component started in its group goes too.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        self.components.clear()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.remove()

    # --- access -----------------------------------------------------------------
    def kubeconfig_for(self, user: str, groups: tuple[str, ...] = ()) -> Path:
        """A kubeconfig that authenticates as `user` in `groups` (client certificate)."""
        safe = user.replace(":", "_").replace("/", "_")
        return self.pki.kubeconfig(self.workdir / f"{safe}.kubeconfig", self.url, user,
                                   (*groups, "system:authenticated"))

    def metrics(self) -> str:
        with urllib.request.urlopen(f"{self.url}/metrics", context=self._admin_context(),
                                    timeout=10) as r:
            text: str = r.read().decode()
            return text


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
