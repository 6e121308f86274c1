"""The systems Airlock is compared with, run on the sandbox as the operators are: built
from their Go modules at pinned versions, their own CRDs and webhooks from the same module,
configured as their documentation says, every port on loopback.

- Kueue (`sigs.k8s.io/kueue` v0.17.0): its manager with the plain-pod integration ("Run
  plain pods" in its docs): `integrations.frameworks: [pod]` and the namespace selector
  its sample configuration gives, Topology-Aware Scheduling (beta, on by default since
  v0.14), fair sharing between the ClusterQueues of a cohort, and waitForPodsReady (all
  or nothing: a workload whose pods are not all Ready in time is evicted and requeued);
  its own certificate management off (the sandbox CA signs the webhook's certificate, as
  cert-manager would), the visibility API server off (an aggregated API the comparison
  does not read).
- Coscheduling (`sigs.k8s.io/scheduler-plugins`): its kube-scheduler with the
  Coscheduling plugin as a second scheduler (`scheduler-plugins-scheduler`, the name its
  Helm chart gives), the profile of its `manifests/coscheduling/scheduler-config.yaml`,
  and its controller, which keeps PodGroup status (the chart's flags, but loopback
  ports). Built against the sandbox's Kubernetes modules (v0.34.4), not the v0.34.7 its
  go.mod pins, which the module proxy does not serve.

Each peer's timers that are policy are divided by the replay's speed (`at_speed`), as
Airlock's are (bench.peers.timers), so a replay at 100x compares policies, not clocks;
those that wait for the cluster itself stay in real seconds (`_TIMERS` says which).

Templates are those of `webhook.sandbox.operators`. They live with the benches, not in
the shipped package: only bench.peers and its tests run them (`python -m bench.peers
--build kueue,coscheduling` builds them ahead).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

from webhook.operators.kueue.keys import GROUP_LABEL as KUEUE_GROUP_LABEL
from webhook.operators.kueue.keys import TOTAL_ANNOTATION as KUEUE_GROUP_COUNT
from webhook.operators.podgroup.keys import POD_GROUP_LABEL
from webhook.sandbox.binaries import KUBERNETES_VERSION, STAGING_VERSION
from webhook.sandbox.gobuilding import GoModule, GoTool
from webhook.sandbox.operators import Command, Operator

__all__ = ["COSCHEDULER", "COSCHEDULING", "KUEUE", "KUEUE_GROUP_COUNT", "KUEUE_GROUP_LABEL",
           "KUEUE_NAMESPACE", "KUEUE_QUEUE_LABEL", "PEERS", "POD_GROUP_LABEL", "at_speed",
           "peer_timers", "whole_seconds"]

KUEUE_NAMESPACE = "kueue-system"
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

# The peers' own timers that are policy, at 1x, in the whole seconds their configuration
# counts: Kueue's requeuing backoff after an eviction (the values of its sample
# configuration, config/components/manager/controller_manager_config.yaml). Left in real
# seconds, as Airlock's --reservation-timeout is: the timers that wait for the cluster
# itself, whose real latency the speed does not shrink. Kueue's waitForPodsReady timeout
# waits for pods to start: at 3 s (5 minutes at 100x) it evicted single pods bound 4 s
# after their admission on this machine. Coscheduling's Permit wait (its only timer, but
# a PodGroup backoff that is 0 by default) waits for a gang's siblings to come through
# the scheduler, whose own backoff is 1 to 10 real seconds.
_TIMERS: dict[str, dict[str, float]] = {
    "kueue": {"backoffBaseSeconds": 60.0, "backoffMaxSeconds": 3600.0}}


def whole_seconds(seconds: float, speed: float) -> int:
    """`seconds / speed` where a configuration counts whole seconds: at least 1, since
    Kueue reads a backoff of 0 as "use the default"."""
    return max(1, math.ceil(seconds / speed - 1e-9))


def peer_timers(speed: float) -> dict[str, dict[str, int]]:
    """Each peer's policy timers as its configuration is given them at `speed`."""
    return {peer: {name: whole_seconds(value, speed) for name, value in timers.items()}
            for peer, timers in _TIMERS.items()}


def _kueue_config(timers: Mapping[str, int]) -> str:
    return f"""\
apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: {KUEUE_NAMESPACE}
leaderElection: {{leaderElect: false}}
internalCertManagement: {{enable: false}}
webhook: {{port: $webhook_port, host: 127.0.0.1, certDir: $certs}}
metrics: {{bindAddress: "127.0.0.1:$metrics_port"}}
health: {{healthProbeBindAddress: "127.0.0.1:$health_port"}}
featureGates: {{VisibilityOnDemand: false, TopologyAwareScheduling: true}}
managedJobsNamespaceSelector:
  matchExpressions:
  - {{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, {KUEUE_NAMESPACE}]}}
integrations:
  frameworks: ["pod"]
# v1beta2 has no fairSharing.enable: the section present is fair sharing on.
fairSharing:
  preemptionStrategies: [LessThanOrEqualToFinalShare, LessThanInitialShare]
waitForPodsReady:
  timeout: 5m
  blockAdmission: false
  requeuingStrategy:
    timestamp: Eviction
    backoffBaseSeconds: {timers['backoffBaseSeconds']}
    backoffMaxSeconds: {timers['backoffMaxSeconds']}
"""

KUEUE = Operator(
    name="kueue",
    tool=GoTool(modules=(GoModule("kueue", "sigs.k8s.io/kueue", "v0.17.0"),),
                commands={"kueue": "sigs.k8s.io/kueue/cmd/kueue"}),
    commands=(Command("kueue", ("--config", "$config"),
                      ready="http://127.0.0.1:$health_port/readyz"),),
    crds=tuple(f"config/components/crd/bases/kueue.x-k8s.io_{kind}.yaml" for kind in (
        "admissionchecks", "clusterqueues", "cohorts", "localqueues", "multikueueclusters",
        "multikueueconfigs", "provisioningrequestconfigs", "resourceflavors", "topologies",
        "workloadpriorityclasses", "workloads")),
    webhooks=("config/components/webhook/manifests.yaml",),
    webhook_kustomization="config/components/webhook/kustomization.yaml",
    name_prefix="kueue-",
    config=_kueue_config(peer_timers(1.0)["kueue"]),
    # With its own certificates off, Kueue reads the metrics server's from this path
    # (where its cert-manager install mounts them) and exits if they are missing.
    fixed_cert_dirs=("/etc/kueue/metrics/certs",),
)

COSCHEDULER = "scheduler-plugins-scheduler"

_COSCHEDULING_CONFIG = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
clientConnection: {{kubeconfig: "$kubeconfig"}}
profiles:
- schedulerName: {COSCHEDULER}
  plugins:
    multiPoint:
      enabled:
      - name: Coscheduling
    queueSort:
      enabled:
      - name: Coscheduling
      disabled:
      - name: "*"
  pluginConfig:
  - name: Coscheduling
    args:
      permitWaitingTimeSeconds: 10
"""

# Its go.mod pins every Kubernetes module to v0.34.7 (k8s.io/kubernetes v1.34.7) with
# replaces; the proxy serves none of those patch releases, so they are taken at the
# sandbox's own Kubernetes version, whose modules its build has downloaded already.
_SCHEDULER_PLUGINS = GoModule(
    "scheduler-plugins", "sigs.k8s.io/scheduler-plugins", "v0.34.7",
    replace_versions={"v0.34.7": STAGING_VERSION, "v1.34.7": KUBERNETES_VERSION})

COSCHEDULING = Operator(
    name="coscheduling",
    tool=GoTool(modules=(_SCHEDULER_PLUGINS,),
                commands={
                    "kube-scheduler-plugins": "sigs.k8s.io/scheduler-plugins/cmd/scheduler",
                    "scheduler-plugins-controller":
                        "sigs.k8s.io/scheduler-plugins/cmd/controller",
                }),
    commands=(
        # No HTTPS port: its self-signed health endpoint is nothing the comparison needs,
        # and the stock scheduler's is checked already.
        Command("kube-scheduler-plugins", ("--config", "$config", "--secure-port", "0")),
        Command("scheduler-plugins-controller", (
            "--probeAddr", "127.0.0.1:$health_port",
            "--metricsAddr", "127.0.0.1:$metrics_port"),
            ready="http://127.0.0.1:$health_port/healthz"),
    ),
    # The controller reconciles ElasticQuotas too, and needs their CRD to start. Its
    # install guide applies manifests/crds/, which the module does not carry for these;
    # these have the schemas of manifests/coscheduling/ and capacityscheduling/crd.yaml.
    crds=("config/crd/bases/scheduling.x-k8s.io_podgroups.yaml",
          "config/crd/bases/scheduling.x-k8s.io_elasticquotas.yaml"),
    config=_COSCHEDULING_CONFIG,
)

PEERS: dict[str, Operator] = {op.name: op for op in (COSCHEDULING, KUEUE)}


def at_speed(peer: Operator, speed: float) -> Operator:
    """The peer with its policy timers divided by the replay's speed (coscheduling has
    none)."""
    if peer.name != KUEUE.name:
        return peer
    return replace(peer, config=_kueue_config(peer_timers(speed)[KUEUE.name]))
