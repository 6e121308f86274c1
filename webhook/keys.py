"""The string keys the webhook and the controller share, and nothing else.

The webhook marks pods with these; the controller reads them back. Keeping them in
one place is what lets the two halves evolve without importing each other.
"""

from typing import Final, Literal

# --- the public contract (docs/architecture.md) -----------------------------------
GATE: Final = "gpu-airlock.io/gang"
CLASS_LABEL: Final = "gpu-airlock.io/class"
GANG_NAME_LABEL: Final = "gpu-airlock.io/gang-name"
GANG_SIZE_ANNOTATION: Final = "gpu-airlock.io/gang-size"
IGNORE_NAMESPACE_LABEL: Final = "gpu-airlock.io/ignore"
SYSTEM_NAMESPACE: Final = "airlock-system"
# The ConfigMap there holding the policy files the webhook and the controller mount
# (policies/kustomization.yaml, the Helm chart, `airlock sandbox up`); `kubectl airlock`
# reads the policy the cluster runs from it.
POLICY_CONFIGMAP: Final = "airlock-policies"
CONTROLLER_IDENTITY: Final = "system:serviceaccount:airlock-system:airlock-controller"
API_VERSION: Final = "gpu-airlock.io/v1alpha1"
# When a pod last saved its work (RFC 3339): preempting it loses only what came after.
CHECKPOINTED_AT_ANNOTATION: Final = "gpu-airlock.io/checkpointed-at"
# A fraction of a GPU, asked for on a pod that requests one whole GPU: the GPU memory it
# needs (a quantity, "10Gi") or the share of a GPU (a number in (0, 1], "0.25"). The
# webhook maps the request to the smallest slice the policy offers that fits.
GPU_MEMORY_ANNOTATION: Final = "gpu-airlock.io/gpu-memory"
GPU_FRACTION_ANNOTATION: Final = "gpu-airlock.io/gpu-fraction"

# The rest of the contract's keys a workload may write (docs/architecture.md): an elastic
# gang's minimum, how long its work is expected to run (for backfill), the topology level
# the gang needs (or prefers), and slices of it that each need one domain of a lower level.
# The webhook reads them and records what the controller acts on under keys of its own.
GANG_MIN_SIZE_ANNOTATION: Final = "gpu-airlock.io/gang-min-size"
EXPECTED_RUNTIME_ANNOTATION: Final = "gpu-airlock.io/expected-runtime"
REQUIRED_TOPOLOGY_ANNOTATION: Final = "gpu-airlock.io/required-topology"
PREFERRED_TOPOLOGY_ANNOTATION: Final = "gpu-airlock.io/preferred-topology"
SLICE_REQUIRED_TOPOLOGY_ANNOTATION: Final = "gpu-airlock.io/slice-required-topology"
SLICE_SIZE_ANNOTATION: Final = "gpu-airlock.io/slice-size"
# The GPU models (policy's `gpuModels`) a pod may run on, most wanted first: "h100,a100".
GPU_MODELS_ANNOTATION: Final = "gpu-airlock.io/gpu-models"

PREFIX: Final = "gpu-airlock.io/"
# The keys under PREFIX that people and their tools may write on a pod, as labels or
# annotations. Every other key under PREFIX is Airlock's own: the webhook strips what it
# would not write itself, and refuses the controller's records; the apiserver refuses any
# change to them but the controller's (deploy/base/admission-policies.yaml lists these
# same keys; a test keeps the two equal).
USER_KEYS: Final = frozenset({
    CLASS_LABEL, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION, CHECKPOINTED_AT_ANNOTATION,
    GPU_MEMORY_ANNOTATION, GPU_FRACTION_ANNOTATION, GANG_MIN_SIZE_ANNOTATION,
    EXPECTED_RUNTIME_ANNOTATION, REQUIRED_TOPOLOGY_ANNOTATION, PREFERRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION, SLICE_SIZE_ANNOTATION, GPU_MODELS_ANNOTATION,
})


def airlocks_own(key: str) -> bool:
    """Whether `key` is Airlock's to write, never a workload's."""
    return key.startswith(PREFIX) and key not in USER_KEYS


ClassName = Literal["training", "inference", "scavenger"]
CLASSES: Final[tuple[ClassName, ...]] = ("training", "inference", "scavenger")

# --- what the webhook records on a pod for the controller --------------------------
# The gang a pod belongs to, as a label value (<= 63 chars, so it can be selected on).
GANG_LABEL: Final = "gpu-airlock.io/gang-id"
# What earlier versions named GANG_LABEL, the same string as GATE: read on the pods they
# made, never written.
LEGACY_GANG_LABEL: Final = "gpu-airlock.io/gang"
# The convention that found the gang, and its size when the pod says.
GANG_SOURCE_ANNOTATION: Final = "gpu-airlock.io/gang-source"
GANG_EXPECTED_SIZE_ANNOTATION: Final = "gpu-airlock.io/gang-expected-size"
# A single pod (in no gang) that Airlock gated to wait in its team's queue: the
# controller admits it as a gang of one. Its value is "true". A gang member is known by
# GANG_LABEL instead; the webhook cannot name a single pod's gang after the pod, since
# a pod made from generateName has no name yet when it is mutated.
QUEUED_ANNOTATION: Final = "gpu-airlock.io/queued"
# The policy rule that decided the class.
RULE_ANNOTATION: Final = "gpu-airlock.io/rule"
# The node label that names the gang's topology domain, and whether one domain is a must.
TOPOLOGY_KEY_ANNOTATION: Final = "gpu-airlock.io/topology-key"
TOPOLOGY_MODE_ANNOTATION: Final = "gpu-airlock.io/topology-mode"
# What the webhook read from the user's keys (or the operator's own fields) for the
# controller: an elastic gang's minimum; the expected run time in whole seconds (the
# smaller of `expected-runtime` and `activeDeadlineSeconds`); the node label of the slice
# level, the slice's size, and which slice of the gang the pod is in (from its index,
# when its operator gives one).
GANG_EXPECTED_MIN_ANNOTATION: Final = "gpu-airlock.io/gang-expected-min-size"
RUNTIME_SECONDS_ANNOTATION: Final = "gpu-airlock.io/expected-runtime-seconds"
SLICE_KEY_ANNOTATION: Final = "gpu-airlock.io/slice-topology-key"
SLICE_EXPECTED_SIZE_ANNOTATION: Final = "gpu-airlock.io/slice-expected-size"
SLICE_INDEX_ANNOTATION: Final = "gpu-airlock.io/slice-index"
# The policy accelerators the pod requests (comma-separated), so the controller counts
# them even after the policy changes.
ACCELERATORS_ANNOTATION: Final = "gpu-airlock.io/accelerators"

# --- what the controller records ---------------------------------------------------
# The durable admission decision, written before any gate is lifted (JSON).
PLACEMENT_ANNOTATION: Final = "gpu-airlock.io/placement"
# A preemption decided for the gang whose anchor pod carries it (JSON): the victims and
# the domain held for it, so a new leader finishes it rather than deciding afresh.
PREEMPTION_ANNOTATION: Final = "gpu-airlock.io/preemption"
# When a waiting gang is expected to start (RFC 3339 UTC, or `unknown` and the gang whose
# unknown end makes it so), on its anchor pod: the controller's forecast
# (docs/predictions.md). Not a record: nothing is decided from it.
PREDICTED_START_ANNOTATION: Final = "gpu-airlock.io/predicted-start"
# A preemption's notice on a victim (RFC 3339): it is evicted at this deadline, or as soon
# as it states a checkpoint (CHECKPOINTED_AT_ANNOTATION) made after the notice, or exits.
# A job reads it through a downward API volume. Set by the controller only when the
# policy gives victims time to checkpoint (`preemption.checkpointGrace`).
PREEMPTION_NOTICE_ANNOTATION: Final = "gpu-airlock.io/preemption-notice"
# The pod condition that tells the same (its message says what to do).
PREEMPTION_NOTICE_CONDITION: Final = "gpu-airlock.io/PreemptionNotice"
# What only the controller writes, after a pod is created: a pod created with one is
# refused, by the webhook and by the apiserver (the records are sealed besides).
CONTROLLER_KEYS: Final = frozenset({PLACEMENT_ANNOTATION, PREEMPTION_ANNOTATION,
                                    PREDICTED_START_ANNOTATION})

DEFAULT_SCHEDULER: Final = "default-scheduler"

# --- capacity requests (docs/autoscaling.md) ------------------------------------------
# A placeholder pod the controller made in SYSTEM_NAMESPACE so an autoscaler grows the
# cluster for a waiting gang: its label (a digest of the unit, which the gang's
# placeholders select each other by to share a domain), and the unit it stands for, as
# `gang/<namespace>/<name>` (or `pod/...`).
PLACEHOLDER_LABEL: Final = "gpu-airlock.io/placeholder"
PLACEHOLDER_FOR_ANNOTATION: Final = "gpu-airlock.io/placeholder-for"
# Their PriorityClass: below every workload's (-1, above the cluster-autoscaler's default
# cutoff of -10 for pods it ignores), never preempting.
PLACEHOLDER_PRIORITY_CLASS: Final = "airlock-placeholder"
PLACEHOLDER_PRIORITY: Final = -1
