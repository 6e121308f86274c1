"""Airlock's own processes next to a control plane: the webhook and the controller,
each a real `python -m webhook ...` process, as a cluster would run them."""

from __future__ import annotations

import signal
import ssl
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from webhook.certificates import SERVICE_HOSTS, CertFiles, make_certs
from webhook.sandbox.launching import free_port, launch, tail, wait_ready

# What `airlock sandbox restart` takes, and the sandbox's name for each process.
RESTARTABLE = {"apiserver": "kube-apiserver", "etcd": "etcd", "scheduler": "kube-scheduler",
               "controller-manager": "kube-controller-manager", "kwok": "kwok",
               "webhook": "airlock-webhook", "controller": "airlock-controller"}


@dataclass
class AirlockProcess:
    process: subprocess.Popen[bytes]
    log: Path
    # As a control plane's Component: what started it, and the URL that answers 200 once
    # it serves, to start it again in place (webhook.sandbox.launching.wait_ready).
    argv: list[str] = field(default_factory=list)
    ready: str = ""
    detached: bool = False

    def tail(self, lines: int = 30) -> str:
        return tail(self.log, lines)

    def restart(self, kill: bool = True) -> AirlockProcess:
        """Stop it (SIGKILL by default: a crash) and start it again with the same flags
        and port; back once it runs, not yet ready."""
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        self.process.wait()
        return AirlockProcess(launch(self.argv, self.log, append=True, session=self.detached),
                              self.log, self.argv, self.ready, self.detached)


def _spawn(argv: list[str], log: Path, detached: bool, ready: str) -> AirlockProcess:
    argv = [sys.executable, "-m", "webhook", *argv]
    return AirlockProcess(launch(argv, log, append=True, session=detached), log, argv, ready,
                          detached)


@dataclass
class Webhook:
    url: str
    certs: CertFiles
    running: AirlockProcess


def serve_tls(workdir: Path, name: str, module: str, flags: list[str],
              detached: bool = False, timeout: float = 30.0, port: int | None = None
              ) -> Webhook:
    """`python -m <module> --port P --cert-dir D <flags>` on a free loopback port (or
    `port`), with certificates of its own in `workdir/<name>-certs` and its log in
    `workdir/<name>.log`; back once it answers /readyz over TLS."""
    certs = make_certs(workdir / f"{name}-certs", SERVICE_HOSTS)
    port = port or free_port()
    url = f"https://127.0.0.1:{port}"
    argv = [sys.executable, "-m", module, *flags, "--port", str(port),
            "--cert-dir", str(certs.cert.parent)]
    log = workdir / f"{name}.log"
    running = AirlockProcess(launch(argv, log, append=True, session=detached), log, argv,
                             f"{url}/readyz", detached)
    wait_ready(f"the {name}", running.process, log, running.ready, timeout,
               ssl.create_default_context(cafile=str(certs.ca)))
    return Webhook(url, certs, running)


def start_webhook(workdir: Path, policies: Path, detached: bool = False,
                  timeout: float = 30.0, extra: list[str] | None = None,
                  port: int | None = None) -> Webhook:
    """The webhook on a free loopback port, with `extra` flags after its own (the last of
    a flag given twice wins). It usually starts before the control plane it serves, so by
    default it has no credentials: /metrics is open and DRA claims are not read; said
    outright, since in a pod (a CI runner) the default would be to ask that pod's
    cluster; nor PriorityClasses (a pod whose class Airlock sets is mutated twice).
    `webhook_reading(kubeconfig)` gives it a plane to read both from."""
    return serve_tls(workdir, "webhook", "webhook",
                     ["serve", "--host", "127.0.0.1", "--policies", str(policies),
                      "--drain-seconds", "0", "--metrics-auth", "none", "--dra", "none",
                      "--priority-classes", "none",
                      *(extra or [])], detached, timeout, port)


def webhook_reading(kubeconfig: Path) -> list[str]:
    """The flags that have the webhook read pods' DRA claims and the PriorityClasses from
    a running plane."""
    return ["--kubeconfig", str(kubeconfig), "--dra", "kubernetes",
            "--priority-classes", "kubernetes"]


def start_controller(workdir: Path, kubeconfig: Path, policies: Path,
                     extra: list[str] | None = None, detached: bool = False,
                     identity: str | None = None) -> AirlockProcess:
    """One controller replica, reading the policy directory the webhook reads. With an
    `identity` it takes part in leader election under that name (and logs to
    controller-IDENTITY.log); without, it acts at once."""
    election = ["--identity", identity] if identity else ["--no-leader-election"]
    log = workdir / (f"controller-{identity}.log" if identity else "controller.log")
    port = free_port()
    return _spawn(["controller", "--kubeconfig", str(kubeconfig), "--policies", str(policies),
                   *election, "--metrics-port", str(port), *(extra or [])], log, detached,
                  f"https://127.0.0.1:{port}/healthz")
