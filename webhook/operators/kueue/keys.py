"""The keys of Kueue (sigs.k8s.io/kueue v0.17.0): its plain pod groups, and the pod-set
annotations of Topology Aware Scheduling (apis/kueue/v1beta2/topology_types.go)."""

GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"

# On a workload's pod template, so on its pods: the node label of the topology level all
# the pod set's pods need (or prefer) one domain of, and of the level each slice of
# `podset-slice-size` pods needs one domain of.
REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY = "kueue.x-k8s.io/podset-preferred-topology"
SLICE_REQUIRED_TOPOLOGY = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE = "kueue.x-k8s.io/podset-slice-size"
