"""The cluster-autoscaler's ProvisioningRequest: Airlock reads none of its pods; it asks
for room with one, and marks the gang's pods to consume it."""
