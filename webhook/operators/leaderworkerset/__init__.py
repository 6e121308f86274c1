"""LeaderWorkerSet (sigs.k8s.io/lws)."""
