"""A real control plane on loopback: etcd, kube-apiserver (RBAC, default admission
plugins, service-account tokens), kube-scheduler and kube-controller-manager, and KWOK in
place of kubelets: it runs the lifecycle of the fake nodes (webhook.sandbox.nodes) and of
the pods bound to them, with KWOK's own stages (webhook.sandbox.stages)."""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from webhook.sandbox.binaries import Binaries
from webhook.sandbox.launching import (
    SETPRIV,
    ControlPlaneError,
    free_port,
    launch,
    tail,
    wait_ready,
)
from webhook.sandbox.nodes import KWOK_NODE
from webhook.sandbox.pki import Pki
from webhook.sandbox.stages import StagesError, cluster_role, write_config


@dataclass
class Component:
    name: str
    process: subprocess.Popen[bytes]
    log: Path
    # What started it and the URL that answers 200 once it serves: enough to start it
    # again in place, on the same ports and data, from this process or another.
    argv: list[str] = field(default_factory=list)
    ready: str = ""
    started: float = field(default_factory=time.monotonic)

    def tail(self, lines: int = 25) -> str:
        return tail(self.log, lines)


# A component just started (its `ready` URL set), and how to trust that URL.
Readiness = tuple[Component, ssl.SSLContext | None]


@dataclass
class ControlPlane:
    binaries: Binaries
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="airlock-cp-")))
    # Detached planes outlive this process (the sandbox); others die with it.
    detached: bool = False
    # How long a fake node's Lease lasts; KWOK renews it every quarter of that, as a
    # kubelet does. Longer for many nodes: see nodes.lease_seconds.
    node_lease_seconds: int = 40
    # Alpha and beta features to turn on, in the apiserver, the scheduler and the
    # controller-manager alike (NAME=true), and API versions the apiserver serves off by
    # default (group/version=true).
    feature_gates: tuple[str, ...] = ()
    runtime_config: tuple[str, ...] = ()
    components: list[Component] = field(default_factory=list)
    url: str = ""
    start_seconds: float = 0.0
    # Seconds each component took to become ready, for the start-time figure.
    timings: dict[str, float] = field(default_factory=dict)
    # Started and not yet awaited (start_apiserver, wait_ready).
    _starting: list[Readiness] = field(default_factory=list)
    _began: float = 0.0

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
            # started the plane exits: start() and restart() from a thread that lives as
            # long.)
            argv = [SETPRIV, "--pdeathsig", "KILL", "--", *argv]
        component = Component(name, launch(argv, log), log, argv)
        self.components.append(component)
        return component

    def _wait(self, component: Component, timeout: float,
              context: ssl.SSLContext | None) -> None:
        self.timings[component.name] = wait_ready(
            component.name, component.process, component.log, component.ready, timeout, context,
            since=component.started)

    def _admin_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        ctx.load_cert_chain(self._admin.cert, self._admin.key)
        return ctx

    def start(self, timeout: float = 60.0) -> ControlPlane:
        return self.start_apiserver(timeout).wait_ready(timeout)

    def start_apiserver(self, timeout: float = 60.0) -> ControlPlane:
        """etcd and kube-apiserver, ready; the rest, which need only the apiserver,
        started and not awaited (`wait_ready`): meanwhile the caller may use the
        apiserver."""
        self._began = time.monotonic()
        if not self.detached:
            atexit.register(self.stop)
        with self._stopped_on_failure():
            self._start_etcd(timeout)
            self._start_apiserver(timeout)
            self._starting = [self._start_scheduler(), self._start_controller_manager(),
                              self._start_kwok()]
        return self

    def wait_ready(self, timeout: float = 60.0) -> ControlPlane:
        """Back once every component serves; one that exits or is not ready within
        `timeout` of its start is an error that stops the plane."""
        with self._stopped_on_failure():
            for component, context in self._starting:
                self._wait(component, timeout, context)
        self._starting = []
        self.start_seconds = time.monotonic() - self._began
        return self

    @contextlib.contextmanager
    def _stopped_on_failure(self) -> Iterator[None]:
        try:
            yield
        except StagesError as e:
            self.stop()
            raise ControlPlaneError(str(e)) from e
        except BaseException:
            self.stop()
            raise

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
        etcd.ready = f"{self.etcd_url}/health"
        self._wait(etcd, timeout, None)

    def _start_apiserver(self, timeout: float) -> None:
        port = free_port()
        self.url = f"https://127.0.0.1:{port}"
        serving = self.pki.issue("apiserver", "kube-apiserver", hosts=(
            "127.0.0.1", "localhost", "10.0.0.1", "kubernetes", "kubernetes.default",
            "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"))
        sa = self._sa = self.pki.service_account_keys()
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
            # Nothing here reaches the apiserver through the `kubernetes` Service, and a
            # reconciler cannot publish a loopback address as its endpoint: older
            # releases logged the failed write, 1.37 refuses to start.
            "--endpoint-reconciler-type", "none",
            "--cert-dir", str(self.workdir / "apiserver-certs"),
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--v=1",
            *self._gates(),
            *(["--runtime-config", ",".join(self.runtime_config)] if self.runtime_config
              else []),
        ])
        apiserver.ready = f"{self.url}/readyz"
        self._wait(apiserver, timeout, self._admin_context())
        self.pki.kubeconfig(self.admin_kubeconfig, self.url, "airlock-admin",
                            ("system:masters",))

    def _gates(self) -> list[str]:
        return ["--feature-gates", ",".join(self.feature_gates)] if self.feature_gates else []

    def _secure_component(self, name: str, binary: Path, user: str,
                          flags: list[str]) -> Readiness:
        """A kube-* component with its own client certificate, serving /healthz on a
        loopback port (its self-signed serving certificate is not checked)."""
        kubeconfig = self.pki.kubeconfig(self.workdir / f"{name}.kubeconfig", self.url, user)
        port = free_port()
        component = self._spawn(name, [
            str(binary), "--kubeconfig", str(kubeconfig),
            "--authentication-kubeconfig", str(kubeconfig),
            "--authorization-kubeconfig", str(kubeconfig),
            "--leader-elect=false", "--bind-address", "127.0.0.1",
            "--secure-port", str(port), "--v=1", *self._gates(), *flags,
        ])
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE
        component.ready = f"https://127.0.0.1:{port}/healthz"
        return component, insecure

    def _start_scheduler(self) -> Readiness:
        # The default 50 requests a second caps binding at 50 pods a second, fewer with
        # its events: placing 2,000 pods, it waited on its own rate limit. (Deprecated
        # flags, honoured while no --config is given.)
        return self._secure_component("kube-scheduler", self.binaries.kube_scheduler,
                                      "system:kube-scheduler",
                                      ["--kube-api-qps", "200", "--kube-api-burst", "400"])

    def _start_controller_manager(self) -> Readiness:
        """The default controllers but one (TTL, below): service accounts and their
        tokens, namespaces, Jobs, Deployments and ReplicaSets, StatefulSets, garbage
        collection, pod GC, the disruption controller, node lifecycle (which lifts the
        not-ready taint), CSRs."""
        return self._secure_component(
            "kube-controller-manager", self.binaries.kube_controller_manager,
            "system:kube-controller-manager", [
                "--service-account-private-key-file", str(self._sa.key),
                "--root-ca-file", str(self.ca_file),
                "--use-service-account-credentials",
                "--cluster-signing-cert-file", str(self.ca_file),
                "--cluster-signing-key-file", str(self.pki.ca_key_file),
                # The default 20/s would make thousands of pods (a 5,000-node sandbox)
                # wait on the client's rate limit, not on the controllers.
                "--kube-api-qps", "200", "--kube-api-burst", "400",
                # A node is unhealthy once its Lease is this old: the lease's duration
                # plus 10 s, as the defaults have it for a kubelet's 40 s lease (and 10 s
                # more for a new node's first status). At 5,000 nodes KWOK takes minutes
                # to initialise them all; the default 60 s had the node lifecycle
                # controller mark thousands Unknown first, fighting KWOK's updates.
                "--node-monitor-grace-period", f"{self.node_lease_seconds + 10}s",
                "--node-startup-grace-period", f"{self.node_lease_seconds + 20}s",
                # Every controller but the TTL controller, which annotates each node with
                # how long a kubelet may cache Secrets, and annotates them all anew each
                # time the cluster's size crosses a step: thousands of writes while
                # 5,000 nodes come up, for kubelets the sandbox does not have.
                "--controllers", "*,-ttl-controller",
            ])

    def _start_kwok(self) -> Readiness:
        """KWOK out of cluster, as user `kwok-controller` bound to KWOK's own ClusterRole,
        managing only the nodes that carry its annotation."""
        self._apply(cluster_role())
        self._apply({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "kwok-controller"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "kwok-controller"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "kwok-controller"}],
        })
        kubeconfig = self.pki.kubeconfig(self.workdir / "kwok.kubeconfig", self.url,
                                         "kwok-controller")
        port = free_port()
        kwok = self._spawn("kwok", [
            str(self.binaries.kwok), "--kubeconfig", str(kubeconfig),
            "--config", str(write_config(self.workdir / "kwok.yaml")),
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector", "=".join(KWOK_NODE),
            "--node-lease-duration-seconds", str(self.node_lease_seconds),
            # Pod IPs, clear of the service range; room for 50,000 pods and more.
            "--cidr", "10.128.0.1/9", "--node-ip", "10.0.1.1",
            "--server-address", f"127.0.0.1:{port}",
            # INFO logs every lease renewal: 500 lines a second at 5,000 nodes.
            "--v", "WARN",
        ])
        kwok.ready = f"http://127.0.0.1:{port}/healthz"
        return kwok, None

    def _apply(self, body: dict[str, object]) -> None:
        """Create a cluster-scoped RBAC object as the admin (409: it is there already)."""
        kind = str(body["kind"]).lower() + "s"
        request = urllib.request.Request(
            f"{self.url}/apis/rbac.authorization.k8s.io/v1/{kind}",
            data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, context=self._admin_context(), timeout=10):
                pass
        except urllib.error.HTTPError as e:
            if e.code != 409:
                raise ControlPlaneError(f"creating {body['kind']}: {e.read().decode()}") from e

    def component(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise ControlPlaneError(f"no component {name!r}; there are "
                                f"{', '.join(c.name for c in self.components)}")

    def restart(self, name: str, kill: bool = False) -> Component:
        """Stop one component (SIGTERM, or SIGKILL with `kill`: a crash) and start it again
        in place, with the same flags, ports and data. Back once it is running, not yet
        ready: `wait_ready` waits for that."""
        old = self.component(name)
        _end(old.process, signal.SIGKILL if kill else signal.SIGTERM)
        new = Component(name, launch(old.argv, old.log, append=True), old.log, old.argv,
                        old.ready)
        self.components[self.components.index(old)] = new
        return new

    def stop(self) -> None:
        for component in reversed(self.components):
            _end(component.process, signal.SIGTERM)
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


def _end(process: subprocess.Popen[bytes], how: signal.Signals) -> None:
    """Signal a child's process group; SIGKILL it if it is not gone within 10 s. Anything
    the component started in its group goes too."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, how)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
