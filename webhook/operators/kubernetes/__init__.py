"""Kubernetes itself: the kinds kube-controller-manager makes pods for (Pod, Deployment,
ReplicaSet, StatefulSet, DaemonSet, Job, CronJob), and the indexed Job's gang."""
