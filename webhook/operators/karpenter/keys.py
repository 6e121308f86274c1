"""The keys of Karpenter (sigs.k8s.io/karpenter v1.15.0, pkg/apis/v1/labels.go) that
Airlock writes."""

# On a pod: Karpenter never disrupts (consolidates, drifts, expires) the node it runs on
# voluntarily while it runs.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"

# On a node: the NodePool that launched it. A pod that selects it gets a node of that
# NodePool and no other.
NODE_POOL_LABEL = "karpenter.sh/nodepool"
