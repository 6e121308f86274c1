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

KWOK_VERSION = "v0.7.0"
HELM_VERSION = "v3.22.0"
# Which minor the tests' control plane, the benches and `sandbox up` run when nothing
# else says: one variable switches a whole e2e run to another release.
KUBERNETES_ENV = "AIRLOCK_KUBERNETES"


class UnknownRelease(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class Release:
    """A Kubernetes minor the sandbox runs: its pinned patch release and the etcd that
    release's go.mod requires (the etcd it is tested with upstream)."""

    minor: str  # "1.34"
    version: str  # "v1.34.4"
    etcd: str

    @property
    def staging(self) -> str:
        """The version of its staging modules (k8s.io/api, ...): v1.X.Y is v0.X.Y."""
        return "v0." + self.version.split(".", 1)[1]


RELEASES = {r.minor: r for r in (
    Release("1.34", "v1.34.4", "v3.6.4"),
    Release("1.35", "v1.35.4", "v3.6.5"),
    Release("1.36", "v1.36.3", "v3.6.8"),
    Release("1.37", "v1.37.2", "v3.7.0"),
)}
DEFAULT_RELEASE = RELEASES["1.34"]


def kubernetes_release(name: str | None = None) -> Release:
    """The release `name` names ("1.37", "v1.37" or its pinned "v1.37.2"); without one,
    the one $AIRLOCK_KUBERNETES names, else the default."""
    wanted = (name or os.environ.get(KUBERNETES_ENV) or DEFAULT_RELEASE.minor).strip()
    for release in RELEASES.values():
        if wanted.lstrip("v") in (release.minor, release.version.lstrip("v")):
            return release
    source = "" if name else f" (from ${KUBERNETES_ENV})"
    raise UnknownRelease(f"Kubernetes {wanted!r}{source} is not one the sandbox pins; "
                         f"choose one of {', '.join(RELEASES)}")


def kubernetes_tool(release: Release) -> GoTool:
    """etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kubectl of one
    release, cached apart from every other's."""
    # What `kube-apiserver --version`, `kubectl version` and discovery report. A module
    # build leaves the placeholder v0.0.0-master, so set what Kubernetes' own release build
    # sets (hack/lib/version.sh), in both places it reads it from.
    stamped = {"gitVersion": release.version, "gitMajor": release.minor.split(".")[0],
               "gitMinor": release.minor.split(".")[1], "gitTreeState": "clean"}
    flags = " ".join(f"-X {pkg}.{key}={value}" for pkg in ("k8s.io/component-base/version",
                                                           "k8s.io/client-go/pkg/version")
                     for key, value in stamped.items())
    return GoTool(
        # k8s.io/kubernetes replaces its staging modules with ./staging paths.
        modules=(GoModule("k8s", "k8s.io/kubernetes", release.version, release.staging),
                 GoModule("etcd", "go.etcd.io/etcd/server/v3", release.etcd)),
        commands={
            "kube-apiserver": "k8s.io/kubernetes/cmd/kube-apiserver",
            "kube-scheduler": "k8s.io/kubernetes/cmd/kube-scheduler",
            "kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
            "kubectl": "k8s.io/kubernetes/cmd/kubectl",
            "etcd": "go.etcd.io/etcd/server/v3",
        },
        # The linker ignores -X for packages a binary does not link (etcd).
        ldflags=f"-s -w {flags}",
        without_go=", or point KUBEBUILDER_ASSETS at a directory with etcd, kube-apiserver "
                   "and kubectl",
    )


# The default release's, for what is built against it whatever the tests run (bench.peers'
# scheduler-plugins) and what names it.
KUBERNETES_VERSION = DEFAULT_RELEASE.version
STAGING_VERSION = DEFAULT_RELEASE.staging
ETCD_VERSION = DEFAULT_RELEASE.etcd
KUBERNETES = kubernetes_tool(DEFAULT_RELEASE)

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


def _warn_on_skew(apiserver: Path, release: Release, progress: Progress) -> None:
    """envtest assets carry no kube-scheduler or kube-controller-manager, so the chosen
    release's join their apiserver; components newer than their apiserver are outside the
    supported skew."""
    try:
        out = subprocess.run([str(apiserver), "--version"], capture_output=True, text=True,
                             timeout=30).stdout.split()
    except (OSError, subprocess.SubprocessError):
        return
    version = out[-1] if out else "unknown"
    if version != release.version:
        progress(f"warning: kube-apiserver {version} from KUBEBUILDER_ASSETS runs with "
                 f"kube-scheduler and kube-controller-manager {release.version}; use "
                 "assets of that release, or choose the assets' release (--kubernetes, "
                 f"${KUBERNETES_ENV}): a component newer than its apiserver is unsupported")


def ensure_binaries(progress: Progress = print, release: Release | None = None,
                    assets_too: bool = True) -> Binaries:
    """The binaries of `release` (by default the one $AIRLOCK_KUBERNETES names), those
    $KUBEBUILDER_ASSETS holds taken from there unless `assets_too` is off (for what only
    that release has)."""
    release = release or kubernetes_release()
    tool = kubernetes_tool(release)
    found: dict[str, Path] = {}
    assets = os.environ.get("KUBEBUILDER_ASSETS") if assets_too else None
    if assets:
        for name in _ENVTEST:
            candidate = Path(assets) / name
            if os.access(candidate, os.X_OK):
                found[name] = candidate
    found.update(ensure(tool, progress, [name for name in tool.commands if name not in found]))
    found.update(ensure(KWOK, progress))
    if found["kube-apiserver"].parent != found["kube-scheduler"].parent:
        _warn_on_skew(found["kube-apiserver"], release, progress)
    return Binaries(etcd=found["etcd"], kube_apiserver=found["kube-apiserver"],
                    kube_scheduler=found["kube-scheduler"],
                    kube_controller_manager=found["kube-controller-manager"],
                    kubectl=found["kubectl"], kwok=found["kwok"])


def ensure_helm(progress: Progress = print) -> Path:
    """Helm, for the chart's tests; the sandbox itself never needs it."""
    return ensure(HELM, progress)["helm"]
