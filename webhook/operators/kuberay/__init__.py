"""KubeRay (ray-project/kuberay): RayCluster and RayJob."""
