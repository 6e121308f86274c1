"""etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and KWOK for the
local control plane, and Helm for the chart's tests.

Taken from `KUBEBUILDER_ASSETS` when a user already has envtest binaries, otherwise built
from the official Go modules at pinned versions (webhook.sandbox.gobuilding) and cached
outside the repository, per version, so only the first run pays the minutes of the build.
`python -m webhook.sandbox.building` builds them ahead.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from webhook.sandbox.gobuilding import GoModule, GoTool, Progress, ensure

KUBERNETES_VERSION = "v1.34.4"
STAGING_VERSION = "v0.34.4"
ETCD_VERSION = "v3.6.4"  # what Kubernetes v1.34.4's go.mod requires
KWOK_VERSION = "v0.7.0"
HELM_VERSION = "v3.22.0"

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

KUBERNETES = GoTool(
    # k8s.io/kubernetes replaces its staging modules with ./staging paths.
    modules=(GoModule("k8s", "k8s.io/kubernetes", KUBERNETES_VERSION, STAGING_VERSION),
             GoModule("etcd", "go.etcd.io/etcd/server/v3", ETCD_VERSION)),
    commands={
        "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
        "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
        "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
        "kubectl": "k8s.io/kubernetes/cmd/kubectl",
        "etcd": "go.etcd.io/etcd/server/v3",
    },
    # The linker ignores -X for packages a binary does not link (etcd).
    ldflags=f"-s -w {_VERSION_FLAGS}",
    without_go=", or point KUBEBUILDER_ASSETS at a directory with etcd, kube-apiserver "
               "and kubectl",
)

KWOK = GoTool(
    modules=(GoModule("kwok", "sigs.k8s.io/kwok", KWOK_VERSION),),
    commands={"kwok": "sigs.k8s.io/kwok/cmd/kwok"},
    # KWOK's own release build stamps nothing that the module does not already carry.
)

# What Helm's release build (its Makefile) stamps: its version, and the Kubernetes version
# `helm template` and `helm lint` assume with no cluster to ask, which it derives from the
# client-go its go.mod requires (v0.37.0 at v3.22.0: 1.37).
_HELM_FLAGS = " ".join([
    f"-X helm.sh/helm/v3/internal/version.version={HELM_VERSION}",
    "-X helm.sh/helm/v3/internal/version.gitTreeState=clean",
    *(f"-X helm.sh/helm/v3/pkg/{pkg}.k8sVersion{part}={value}"
      for pkg in ("lint/rules", "chartutil") for part, value in (("Major", "1"),
                                                                  ("Minor", "37"))),
])

HELM = GoTool(
    modules=(GoModule("helm", "helm.sh/helm/v3", HELM_VERSION),),
    commands={"helm": "helm.sh/helm/v3/cmd/helm"},
    ldflags=f"-s -w {_HELM_FLAGS}",
)

# envtest assets carry these; the rest always comes from the pinned modules.
_ENVTEST = ("etcd", "kube-apiserver", "kubectl")


@dataclass(frozen=True, slots=True)
class Binaries:
    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kube_controller_manager: Path
    kubectl: Path
    kwok: Path


def _warn_on_skew(apiserver: Path, progress: Progress) -> None:
    """envtest assets carry no kube-scheduler or kube-controller-manager, so ours
    (KUBERNETES_VERSION) join their apiserver; components newer than their apiserver are
    outside the supported skew."""
    try:
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True,
                             timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return
    version = out[-1] if out else "unknown"
    if version != KUBERNETES_VERSION:
        progress(f"warning: kube-apiserver {version} from KUBEBUILDER_ASSETS runs with "
                 f"kube-scheduler and kube-controller-manager {KUBERNETES_VERSION}; "
                 "components newer than their apiserver are unsupported (use assets of "
                 "the same version)")


def ensure_binaries(progress: Progress = print) -> Binaries:
    found: dict[str, Path] = {}
    assets = os.environ.get("KUBEBUILDER_ASSETS")
    if assets:
        for name in _ENVTEST:
            candidate = Path(assets) / name
            if os.access(candidate, os.X_OK):
                found[name] = candidate
    found.update(ensure(KUBERNETES, progress,
                        [name for name in KUBERNETES.commands if name not in found]))
    found.update(ensure(KWOK, progress))
    if found["kube-apiserver"].parent != found["kube-scheduler"].parent:
        _warn_on_skew(found["kube-apiserver"], progress)
    return Binaries(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"],
                    kube_scheduler=found["kube-scheduler"],
                    kube_controller_manager=found["kube-controller-manager"],
                    kubectl=found["kubectl"], kwok=found["kwok"])


def ensure_helm(progress: Progress = print) -> Path:
    """Helm, for the chart's tests; the sandbox itself never needs it."""
    return ensure(HELM, progress)["helm"]
