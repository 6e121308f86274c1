"""The keys of Kueue's plain pod groups (sigs.k8s.io/kueue)."""

GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
TOTAL_ANNOTATION = "kueue.x-k8s.io/pod-group-total-count"
