"""GPUs claimed through Dynamic Resource Allocation (`resource.k8s.io`), as both halves
count them: what a ResourceClaim or ResourceClaimTemplate asks for (`claims`), what a
node's ResourceSlices offer (`slices`), and which devices policy counts as GPUs (`kinds`).

A DeviceClass the policy maps (`spec.deviceClasses`) becomes a resource of its own,
`dra.gpu-airlock.io/<class>`: a pod's claims add it to what the pod requests, a node's
slices to what the node has. Fit, quotas, fair share and preemption then count DRA GPUs
exactly as they count extended resources, and a cluster may hold both kinds at once.
Pure: the shells feed it what their watches and caches hold.
"""
