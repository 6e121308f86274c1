"""etcd, kube-apiserver, kube-scheduler and kubectl for the local control plane.

Taken from `KUBEBUILDER_ASSETS` when a user already has envtest binaries, otherwise built
from the official Go modules at pinned versions and cached outside the repository, per
version, so only the first run pays the few minutes of the build.

    python -m webhook.sandbox.binaries    # build or reuse; prints the directory
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
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

# What `kube-apiserver --version`, `kubectl version` and discovery report. A module build
# leaves the placeholder v0.0.0-master, so set what Kubernetes' own release build sets
# (hack/lib/version.sh), in both places it reads it from.
_VERSION_VARS = {
    "gitVersion": KUBERNETES_VERSION,
    "gitMajor": KUBERNETES_VERSION.lstrip("v").split(".")[0],
    "gitMinor": KUBERNETES_VERSION.split(".")[1],
    "gitTreeState": "clean",
}
_VERSION_FLAGS = " ".join(
    f"-X {pkg}.{key}={value}" for pkg in ("k8s.io/component-base/version",
                                          "k8s.io/client-go/pkg/version")
    for key, value in _VERSION_VARS.items())

# A cached binary is reused only when made by this recipe; changing the versions or the
# flags here rebuilds it.
RECIPE = f"k8s {KUBERNETES_VERSION} etcd {ETCD_VERSION} ldflags -s -w {_VERSION_FLAGS}"

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
            f"Go is needed to build {', '.join(names)} for the local control plane, and "
            "`go` is not on PATH. Install Go 1.21 or newer (https://go.dev/dl/; it fetches "
            "the toolchain version the build needs by itself), or point KUBEBUILDER_ASSETS "
            "at a directory with etcd, kube-apiserver, kube-scheduler and kubectl.")
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
        ldflags = "-s -w" if name == "etcd" else f"-s -w {_VERSION_FLAGS}"
        _run([go, "build", "-trimpath", f"-ldflags={ldflags}", "-o", str(scratch / name),
              PACKAGES[name]], module, progress, f"compiling {name}")
    bin_dir.mkdir(exist_ok=True)
    for name in names:
        os.replace(scratch / name, bin_dir / name)
        # The stamp comes last: a binary without it is rebuilt.
        _stamp(bin_dir, name).write_text(RECIPE)
    scratch.rmdir()
    progress(f"built in {time.monotonic() - started:.0f}s")
    return bin_dir


def _stamp(bin_dir: Path, name: str) -> Path:
    return bin_dir / f".{name}.recipe"


def _cached(bin_dir: Path, name: str) -> bool:
    try:
        stamp = _stamp(bin_dir, name).read_text()
    except OSError:
        return False
    return stamp == RECIPE and os.access(bin_dir / name, os.X_OK)


def _warn_on_skew(apiserver: Path, progress: Progress) -> None:
    """envtest assets carry no kube-scheduler, so ours (KUBERNETES_VERSION) joins their
    apiserver; a scheduler newer than its apiserver is outside the supported skew."""
    try:
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True,
                             timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return
    version = out[-1] if out else "unknown"
    if version != KUBERNETES_VERSION:
        progress(f"warning: kube-apiserver {version} from KUBEBUILDER_ASSETS runs with "
                 f"kube-scheduler {KUBERNETES_VERSION}; a scheduler newer than its "
                 "apiserver is unsupported (use assets of the same version)")


@contextlib.contextmanager
def _lock(path: Path, progress: Progress) -> Iterator[None]:
    """One build at a time per version: two would share the module directory and each
    spend minutes of both cores."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another build of the binaries to finish ({path})")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


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
        if name not in found and _cached(bin_dir, name):
            found[name] = bin_dir / name
    missing = [name for name in PACKAGES if name not in found]
    if missing:
        with _lock(version_dir() / "build.lock", progress):
            # Another process (a second test run, `airlock sandbox up`) may have built
            # them while this one waited for the lock.
            missing = [name for name in missing if not _cached(bin_dir, name)]
            if missing:
                _build(missing, progress)
        found.update({name: bin_dir / name for name in PACKAGES if name not in found})
    if found["kube-apiserver"].parent != found["kube-scheduler"].parent:
        _warn_on_skew(found["kube-apiserver"], progress)
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
