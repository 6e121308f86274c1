"""The objects people write (Deployments, Jobs, JobSets, PyTorchJobs, ...) expanded into
the pods their controllers would create, offline and without I/O.

Each kind family is one module that follows its operator's source at the version the
sandbox pins; `registry` lists them by (API group, kind).
"""
