"""The keys Kubernetes itself writes on the pods its controllers make (k8s.io/kubernetes
v1.34.4: the apiserver's Job strategy, the Job, CronJob, ReplicaSet, Deployment,
StatefulSet and DaemonSet controllers), and the node-condition taints every daemon pod
tolerates."""

JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME = "job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
SCHEDULED_TIMESTAMP = "batch.kubernetes.io/cronjob-scheduled-timestamp"

POD_TEMPLATE_HASH = "pod-template-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION_HASH = "controller-revision-hash"
TEMPLATE_GENERATION = "pod-template-generation"

NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"
DISK_PRESSURE_TAINT = "node.kubernetes.io/disk-pressure"
MEMORY_PRESSURE_TAINT = "node.kubernetes.io/memory-pressure"
PID_PRESSURE_TAINT = "node.kubernetes.io/pid-pressure"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
NETWORK_UNAVAILABLE_TAINT = "node.kubernetes.io/network-unavailable"

# Workload-aware scheduling (scheduling.k8s.io; beta in 1.37 behind the GenericWorkload
# gate): a pod names its PodGroup in `spec.schedulingGroup.podGroupName` (since 1.36), and
# a gang PodGroup states its size in `spec.schedulingPolicy.gang.minCount`.
SCHEDULING_GROUP = "scheduling.k8s.io"
POD_GROUP_VERSION = "v1beta1"
