"""The Kubeflow training-operator's jobs (PyTorchJob, TFJob, ...) and MPIJob."""
