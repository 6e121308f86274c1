"""`kubectl airlock`: the krew plugin. It reads the cluster with the user's kubeconfig and
RBAC, the policy from the ConfigMap the deployment mounts, and shows what `airlock status`
shows, per queue, and why one pod or workload waits. Pure parts (`references`, `telling`,
`tables`) decide what to show; `reaching` and `asking` talk to the apiserver; `commands`
is the command line."""
