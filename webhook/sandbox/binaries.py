"""etcd, kube-apiserver, kube-scheduler and kubectl for the local control plane.

Taken from `KUBEBUILDER_ASSETS` when a user already has envtest binaries, otherwise built
from the official Go modules at pinned versions and cached outside the repository, per
version, so only the first run pays the few minutes of the build.

    python -m webhook.sandbox.binaries    # build or reuse; prints the directory
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KUBERNETES_VERSION = "v1.34.4"
STAGING_VERSION = "v0.34.4"
ETCD_VERSION = "v3.6.4"  # what Kubernetes v1.34.4's go.mod requires

# k8s.io/kubernetes replaces these with ./staging paths; a module that requires it must
# point each one at its published version instead.
STAGING_MODULES = (
    "api", "apiextensions-apiserver", "apimachinery", "apiserver", "cli-runtime",
    "client-go", "cloud-provider", "cluster-bootstrap", "code-generator", "component-base",
    "component-helpers", "controller-manager", "cri-api", "cri-client", "csi-translation-lib",
    "dynamic-resource-allocation", "endpointslice", "externaljwt", "kms", "kube-aggregator",
    "kube-controller-manager", "kube-proxy", "kube-scheduler", "kubectl", "kubelet",
    "metrics", "mount-utils", "pod-security-admission", "sample-apiserver",
    "sample-cli-plugin", "sample-controller",
)

PACKAGES = {
    "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
    "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
    "kubectl": "k8s.io/kubernetes/cmd/kubectl",
    "etcd": "go.etcd.io/etcd/server/v3",
}

Progress = Callable[[str], None]


class BinariesError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kubectl: Path


def cache_root() -> Path:
    base = os.environ.get("AIRLOCK_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "airlock")
    return Path(base)


def version_dir() -> Path:
    return cache_root() / f"k8s-{KUBERNETES_VERSION}-etcd-{ETCD_VERSION}"


def _go_mod() -> str:
    lines = [
        "module airlock.local/k8sbuild", "", "go 1.24.0", "",
        "require (",
        f"\tk8s.io/kubernetes {KUBERNETES_VERSION}",
        f"\tgo.etcd.io/etcd/server/v3 {ETCD_VERSION}",
        ")", "",
    ]
    lines += [f"replace k8s.io/{m} => k8s.io/{m} {STAGING_VERSION}" for m in STAGING_MODULES]
    return "\n".join(lines) + "\n"


def _tools_go() -> str:
    imports = "\n".join(f'\t_ "{pkg}"' for pkg in PACKAGES.values())
    return f"//go:build tools\n\npackage tools\n\nimport (\n{imports}\n)\n"


def _run(cmd: list[str], cwd: Path, progress: Progress, what: str) -> None:
    """Run a long go command, passing its lines on and saying it is alive meanwhile."""
    start = time.monotonic()
    done = threading.Event()

    def heartbeat() -> None:
        while not done.wait(30):
            progress(f"  ... still {what} ({time.monotonic() - start:.0f}s)")

    threading.Thread(target=heartbeat, daemon=True).start()
    try:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        tail: list[str] = []
        for line in proc.stdout:
            tail = [*tail[-29:], line.rstrip()]
            if not line.startswith("go: downloading"):
                progress(f"  {line.rstrip()}")
        if proc.wait() != 0:
            raise BinariesError(f"{' '.join(cmd)} failed:\n" + "\n".join(tail))
    finally:
        done.set()


def _build(names: list[str], progress: Progress) -> Path:
    go = shutil.which("go")
    if go is None:
        raise BinariesError(
            "Go is needed to build etcd, kube-apiserver, kube-scheduler and kubectl for the "
            "local control plane, and `go` is not on PATH. Install Go 1.21 or newer (it "
            "fetches the toolchain version it needs by itself), or point KUBEBUILDER_ASSETS "
            "at a directory with those binaries.")
    root = version_dir()
    bin_dir = root / "bin"
    module = root / "module"
    module.mkdir(parents=True, exist_ok=True)
    (module / "go.mod").write_text(_go_mod())
    (module / "tools.go").write_text(_tools_go())
    started = time.monotonic()
    progress(f"building {', '.join(names)} from Kubernetes {KUBERNETES_VERSION} and etcd "
             f"{ETCD_VERSION} (first run only; a few minutes on 2 cores) into {bin_dir}")
    _run([go, "mod", "tidy"], module, progress, "resolving modules")
    # Build into a scratch directory and move into place, so an interrupted build is never
    # mistaken for a finished one.
    scratch = root / f"bin.partial-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    for name in names:
        progress(f"  compiling {name}")
        _run([go, "build", "-trimpath", "-ldflags=-s -w", "-o", str(scratch / name),
              PACKAGES[name]], module, progress, f"compiling {name}")
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        os.replace(scratch / name, bin_dir / name)
    scratch.rmdir()
    progress(f"built in {time.monotonic() - started:.0f}s")
    return bin_dir


def ensure_binaries(progress: Progress = print) -> Binaries:
    found: dict[str, Path] = {}
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        for name in PACKAGES:
            candidate = Path(assets) / name
            if os.access(candidate, os.X_OK):
                found[name] = candidate
    bin_dir = version_dir() / "bin"
    for name in PACKAGES:
        candidate = bin_dir / name
        if name not in found and os.access(candidate, os.X_OK):
            found[name] = candidate
    missing = [name for name in PACKAGES if name not in found]
    if missing:
        built = _build(missing, progress)
        found.update({name: built / name for name in missing})
    return Binaries(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"],
                    kube_scheduler=found["kube-scheduler"], kubectl=found["kubectl"])


def main() -> int:
    try:
        binaries = ensure_binaries(lambda line: print(line, file=sys.stderr, flush=True))
    except BinariesError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name, path in (("etcd", binaries.etcd), ("kube-apiserver", binaries.kube_apiserver),
                       ("kube-scheduler", binaries.kube_scheduler),
                       ("kubectl", binaries.kubectl)):
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
