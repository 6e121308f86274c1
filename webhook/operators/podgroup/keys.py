"""The keys of the coscheduling plugin's PodGroup (sigs.k8s.io/scheduler-plugins)."""

GROUP = "scheduling.x-k8s.io"
VERSION = "v1alpha1"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
