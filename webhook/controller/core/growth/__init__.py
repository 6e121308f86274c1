"""Capacity requests: which gangs ask the cluster to grow (`asking`), and the two ways of
asking, placeholder pods (`placeholders`) and ProvisioningRequests (`provisioning`)."""
