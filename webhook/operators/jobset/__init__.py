"""JobSet (sigs.k8s.io/jobset), and Kubeflow Trainer v2 which runs on it."""
