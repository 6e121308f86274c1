"""The real operators the sandbox can run next to Airlock, one declarative entry each:
the Go module it is built from, where its CRDs and admission webhooks live in that
module's source, and how to run it out-of-cluster against the sandbox.

Facts behind each entry (flags, paths, what each writes on its pods) are in
docs/operators.md. Arguments and configuration files are `string.Template`s over:
`$kubeconfig`, `$config` (the rendered `config`), `$certs` (a directory holding
`tls.crt` and `tls.key` for 127.0.0.1), and the free loopback ports `$webhook_port`,
`$metrics_port` and `$health_port`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.sandbox.gobuilding import GoModule, GoTool


class UnknownOperator(ValueError):
    pass


class OperatorError(RuntimeError):
    """An operator that could not be built, installed or started."""


@dataclass(frozen=True, slots=True)
class Command:
    """One process of an operator."""

    binary: str
    args: tuple[str, ...]
    # Answers 200 once the process is up; None when it serves nothing to ask.
    ready: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Operator:
    name: str
    tool: GoTool
    commands: tuple[Command, ...]
    # Paths inside the module's source, as released at the pinned version.
    crds: tuple[str, ...]
    webhooks: tuple[str, ...] = ()
    # kustomize's JSON 6902 patches of the webhook files: (patch file, target name).
    webhook_patches: tuple[tuple[str, str], ...] = ()
    # A kustomization.yaml whose inline `patches` (strategic merges of webhooks, matched
    # by name: Kueue narrows its pod webhooks' namespaceSelector there) apply too.
    webhook_kustomization: str | None = None
    # kustomize's namePrefix: kubebuilder projects all name theirs
    # `mutating-webhook-configuration`, so two operators would overwrite each other's.
    name_prefix: str = ""
    config: str | None = None
    # Helm templates leave `{{ ... }}` in the CRDs' labels, which the apiserver refuses.
    strip_crd_labels: bool = False
    # The namespace of the Secret an always-on cert-controller rotator keeps (rotators.py
    # makes one it accepts); None for operators whose own certificates are off.
    rotator_namespace: str | None = None
    # Directories an operator reads a certificate from at a path it has no flag for (Kueue's
    # metrics server with its own certificates off, v0.12 to v0.17): given tls.crt and
    # tls.key for 127.0.0.1, signed by the sandbox CA.
    fixed_cert_dirs: tuple[str, ...] = ()
    # The resources (CRDs' plurals) it is narrowed to, its CRDs and webhooks for them
    # only; empty: all it has.
    resources: frozenset[str] = frozenset()

    def serves(self, resources: list[str]) -> bool:
        """Whether a CRD or webhook rule for these resources is installed."""
        return not self.resources or bool(self.resources.intersection(resources))


# The kubebuilder Configuration both JobSet and LeaderWorkerSet read: no leader election,
# no certificates of their own (the sandbox CA signs the serving certificate), every port
# on loopback.
_KUBEBUILDER_CONFIG = """\
apiVersion: $api
kind: Configuration
leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {port: $webhook_port, host: 127.0.0.1, certDir: $certs}
metrics: {bindAddress: "127.0.0.1:$metrics_port"$metrics_extra}
health: {healthProbeBindAddress: "127.0.0.1:$health_port"}
"""

_READYZ = "http://127.0.0.1:$health_port/readyz"

JOBSET = Operator(
    name="jobset",
    tool=GoTool(modules=(GoModule("jobset", "sigs.k8s.io/jobset", "v0.10.1"),),
                commands={"jobset": "sigs.k8s.io/jobset"}),
    commands=(Command("jobset", ("--config", "$config", "--kubeconfig", "$kubeconfig"),
                      ready=_READYZ),),
    crds=("config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml",),
    webhooks=("config/components/webhook/manifests.yaml",),
    webhook_patches=(
        ("config/components/webhook/patches/mutating-patch.yaml",
         "mutating-webhook-configuration"),
        ("config/components/webhook/patches/validating-patch.yaml",
         "validating-webhook-configuration"),
    ),
    name_prefix="jobset-",
    # With its own certificates off, JobSet's HTTPS metrics look for theirs in
    # /tmp/k8s-metrics-server/serving-certs unless told.
    config=_KUBEBUILDER_CONFIG.replace("$api", "config.jobset.x-k8s.io/v1alpha1")
    .replace("$metrics_extra", ", certDir: $certs"),
)

LWS = Operator(
    name="lws",
    tool=GoTool(modules=(GoModule("lws", "sigs.k8s.io/lws", "v0.7.0"),),
                commands={"lws": "sigs.k8s.io/lws/cmd"}),
    commands=(Command("lws", ("--config", "$config", "--kubeconfig", "$kubeconfig"),
                      ready=_READYZ),),
    crds=("config/crd/bases/leaderworkerset.x-k8s.io_leaderworkersets.yaml",),
    webhooks=("config/webhook/manifests.yaml",),
    webhook_patches=(
        ("config/webhook/mutating-patch.yaml", "mutating-webhook-configuration"),
        ("config/webhook/validating-patch.yaml", "validating-webhook-configuration"),
    ),
    name_prefix="lws-",
    config=_KUBEBUILDER_CONFIG.replace("$api", "config.lws.x-k8s.io/v1alpha1")
    .replace("$metrics_extra", ""),
)

TRAINING_OPERATOR = Operator(
    name="training-operator",
    tool=GoTool(modules=(GoModule("training-operator", "github.com/kubeflow/training-operator",
                                  "v1.9.2"),),
                commands={"training-operator":
                          "github.com/kubeflow/training-operator/cmd/training-operator.v1"}),
    commands=(Command(
        "training-operator",
        ("--kubeconfig", "$kubeconfig", "--leader-elect=false",
         "--metrics-bind-address", "127.0.0.1:$metrics_port",
         "--health-probe-bind-address", "127.0.0.1:$health_port",
         "--webhook-server-port", "$webhook_port"),
        ready=_READYZ, env={"MY_POD_NAMESPACE": "kubeflow"}),),
    crds=tuple(f"manifests/base/crds/kubeflow.org_{kind}.yaml" for kind in (
        "jaxjobs", "mpijobs", "paddlejobs", "pytorchjobs", "tfjobs", "xgboostjobs")),
    webhooks=("manifests/base/webhook/manifests.yaml",),
    webhook_patches=(("manifests/base/webhook/patch.yaml", "validating-webhook-configuration"),),
    # v1.9.2 has no switch for it.
    rotator_namespace="kubeflow",
)

# `up --demo`'s: its PyTorchJobs only. Each of the other five CRDs (a pod template's schema
# apiece) cost the apiserver a second or more of CPU to install, which the demo waited on.
PYTORCH_ONLY = dataclasses.replace(
    TRAINING_OPERATOR,
    commands=tuple(dataclasses.replace(c, args=(*c.args, "--enable-scheme", "pytorchjob"))
                   for c in TRAINING_OPERATOR.commands),
    resources=frozenset({"pytorchjobs"}))

KUBERAY = Operator(
    name="kuberay",
    tool=GoTool(modules=(GoModule("kuberay", "github.com/ray-project/kuberay/ray-operator",
                                  "v1.4.2"),),
                commands={"kuberay": "github.com/ray-project/kuberay/ray-operator"}),
    # Its validating webhook is opt-in (ENABLE_WEBHOOKS=true) and, at v1.4.2, listens on
    # :9443 on every interface with no flag to move it: left off, as its default install
    # leaves it.
    commands=(Command("kuberay", (
        "--kubeconfig", "$kubeconfig", "--enable-leader-election=false",
        "--metrics-addr", "127.0.0.1:$metrics_port",
        "--health-probe-bind-address", "127.0.0.1:$health_port",
        "--log-stdout-encoder", "console"), ready=_READYZ),),
    crds=tuple(f"config/crd/bases/ray.io_{kind}.yaml"
               for kind in ("rayclusters", "rayjobs", "rayservices")),
)

CERT_MANAGER_NAMESPACE = "cert-manager"
CERT_MANAGER = Operator(
    name="cert-manager",
    # The newest release whose module holds cmd/controller and cmd/cainjector: from v1.12
    # they are nested modules of their own, which the module proxy does not serve.
    tool=GoTool(modules=(GoModule("cert-manager", "github.com/cert-manager/cert-manager",
                                  "v1.11.5"),),
                commands={
                    "cert-manager-controller":
                        "github.com/cert-manager/cert-manager/cmd/controller",
                    "cert-manager-cainjector":
                        "github.com/cert-manager/cert-manager/cmd/cainjector",
                }),
    commands=(
        Command("cert-manager-controller", (
            "--kubeconfig", "$kubeconfig", "--leader-elect=false",
            "--cluster-resource-namespace", CERT_MANAGER_NAMESPACE,
            "--metrics-listen-address", "127.0.0.1:$metrics_port"),
            ready="http://127.0.0.1:$metrics_port/metrics"),
        Command("cert-manager-cainjector", (
            "--kubeconfig", "$kubeconfig", "--leader-elect=false")),
    ),
    crds=tuple(f"deploy/crds/crd-{kind}.yaml" for kind in (
        "certificaterequests", "certificates", "challenges", "clusterissuers", "issuers",
        "orders")),
    strip_crd_labels=True,
)

OPERATORS: dict[str, Operator] = {op.name: op for op in (
    JOBSET, LWS, TRAINING_OPERATOR, KUBERAY, CERT_MANAGER)}

# Not one of OPERATORS (`--operators all` runs them next to every test): it grows and
# shrinks the cluster, so only `sandbox up --autoscaler karpenter` starts it.
KARPENTER = Operator(
    name="karpenter",
    # Its kwok provider: the real Karpenter (provisioning, consolidation) with a cloud
    # provider that makes KWOK nodes. v1.15.0's go.mod asks for Go 1.26.9.
    tool=GoTool(modules=(GoModule("karpenter", "sigs.k8s.io/karpenter", "v1.15.0"),),
                commands={"karpenter": "sigs.k8s.io/karpenter/kwok"},
                env={"GOTOOLCHAIN": "go1.26.9"}),
    # Its metrics and health ports listen on every interface: it has no flag for the host.
    commands=(Command("karpenter", (
        "--disable-leader-election", "--metrics-port", "$metrics_port",
        "--health-probe-port", "$health_port", "--instance-types-file-path", "$config",
        "--log-level", "info"), ready="http://127.0.0.1:$health_port/readyz"),),
    crds=(*(f"pkg/apis/crds/karpenter.sh_{kind}.yaml"
            for kind in ("nodepools", "nodeclaims", "nodeoverlays")),
          "kwok/apis/crds/karpenter.kwok.sh_kwoknodeclasses.yaml"),
    # Its instance types, one a node pool: autoscaling.instance_types writes them.
    config=None,
)
AUTOSCALERS: dict[str, Operator] = {KARPENTER.name: KARPENTER}


def select(spec: str) -> list[Operator]:
    """The operators a `--operators` value names: comma-separated names, or `all`."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    if names == ["all"]:
        return list(OPERATORS.values())
    unknown = [n for n in names if n not in OPERATORS]
    if unknown:
        raise UnknownOperator(
            f"unknown operator{'s' if len(unknown) > 1 else ''} {', '.join(unknown)}; "
            f"known: {', '.join(OPERATORS)} (or all)")
    return [OPERATORS[n] for n in dict.fromkeys(names)]
