"""The Kubeflow training-operator's jobs, as github.com/kubeflow/training-operator v1.9.2
makes their pods:
- PyTorchJob, TFJob, XGBoostJob, PaddleJob: pkg/controller.v1/common/pod.go createNewPod
  (pod `<job>-<replica type, lower case>-<index>`, labels operator-name, job-name,
  replica-type, replica-index, job-role=master for the kind's IsMasterRole), the replica
  spec's restartPolicy (core.SetRestartPolicy; ExitCode runs as Never) with each kind's
  default from pkg/apis/kubeflow.org/v1/*_defaults.go;
- JAXJob (since v1.9.0): the same createNewPod (pkg/controller.v1/jax: master role for
  index 0);
- MPIJob (kubeflow.org/v1): pkg/controller.v1/mpi/mpijob_controller.go newLauncher and
  newWorker (`<job>-launcher` with job-role=master and no replica-index, `<job>-worker-<i>`
  whose replica-index getOrCreateWorker adds; workers default to 0 replicas).
Gang scheduling through Volcano or scheduler-plugins is an operator flag, off by default,
and not shown. Nor are the environment variables (MASTER_ADDR, TF_CONFIG, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.operators.kubeflow.keys import (
    GROUP,
    JOB_NAME_LABEL,
    JOB_ROLE,
    OPERATOR_NAME,
    REPLICA_INDEX,
    REPLICA_TYPE,
)
from webhook.workloads.expansions import Context, Expansion, Expansions, Group, Pod
from webhook.workloads.objects import Meta, WorkloadError, count, mapping, pod_template, text
from webhook.workloads.templates import pod_from_template

# IsMasterRole(replica types present, this type, index)
MasterRole = Callable[[set[str], str, int], bool]


def _master_or_worker0(masters: tuple[str, ...]) -> MasterRole:
    def role(types: set[str], rtype: str, index: int) -> bool:
        if types & set(masters):
            return rtype in masters
        return rtype == "Worker" and index == 0
    return role


@dataclass(frozen=True, slots=True)
class TrainingKind:
    specs_field: str
    controller: str
    restart_policy: str
    master: MasterRole


KINDS: dict[str, TrainingKind] = {
    "PyTorchJob": TrainingKind("pytorchReplicaSpecs", "pytorchjob-controller", "OnFailure",
                               _master_or_worker0(("Master",))),
    "TFJob": TrainingKind("tfReplicaSpecs", "tfjob-controller", "Never",
                          _master_or_worker0(("Chief", "Master"))),
    "XGBoostJob": TrainingKind("xgbReplicaSpecs", "xgboostjob-controller", "Never",
                               lambda _types, rtype, _index: rtype == "Master"),
    "PaddleJob": TrainingKind("paddleReplicaSpecs", "paddlejob-controller", "OnFailure",
                              lambda _types, rtype, _index: rtype == "Master"),
    "JAXJob": TrainingKind("jaxReplicaSpecs", "jaxjob-controller", "Never",
                           lambda _types, _rtype, index: index == 0),
}


def _replica_specs(obj: Mapping[str, Any], field: str) -> dict[str, Mapping[str, Any]]:
    spec = mapping(obj, "spec", ())
    specs = mapping(spec, field, ("spec",))
    if not specs:
        raise WorkloadError(("spec", field), "is missing: no replica specs")
    for rtype in specs:
        mapping(specs, rtype, ("spec", field))
        pod_template(specs[rtype], ("spec", field, rtype))
    return dict(specs)


def _restart_policy(rspec: Mapping[str, Any], default: str) -> str:
    policy = rspec.get("restartPolicy") or default
    return "Never" if policy == "ExitCode" else str(policy)


def expand_training_job(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    kind_name = text(obj, "kind", ())
    kind = KINDS[kind_name]
    meta = Meta(obj, kind_name)
    specs = _replica_specs(obj, kind.specs_field)
    owner = meta.owner_reference()
    job = meta.name.replace("/", "-")
    groups = []
    for rtype, rspec in specs.items():
        path = ("spec", kind.specs_field, rtype)

        def make(i: int, rtype: str = rtype, rspec: Mapping[str, Any] = rspec) -> Pod:
            rt = rtype.lower()
            labels = {OPERATOR_NAME: kind.controller, JOB_NAME_LABEL: job, REPLICA_TYPE: rt,
                      REPLICA_INDEX: str(i)}
            if kind.master(set(specs), rtype, i):
                labels[JOB_ROLE] = "master"
            pod = pod_from_template(rspec["template"], namespace=meta.namespace, owner=owner,
                                    name=f"{job}-{rt}-{i}", labels=labels)
            pod["spec"]["restartPolicy"] = _restart_policy(rspec, kind.restart_policy)
            return pod

        groups.append(Group(f"{rtype} replicas", count(rspec, "replicas", path, 1), make,
                            (obj,)))
    return Expansion(kind_name, meta.name, meta.namespace, tuple(groups))


def expand_mpijob(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "MPIJob")
    specs = _replica_specs(obj, "mpiReplicaSpecs")
    owner = meta.owner_reference()
    base = {OPERATOR_NAME: "mpijob-controller", JOB_NAME_LABEL: meta.name}
    groups = []
    for rtype, rspec in specs.items():
        path = ("spec", "mpiReplicaSpecs", rtype)
        if rtype == "Launcher":
            def launcher(_: int, rspec: Mapping[str, Any] = rspec) -> Pod:
                pod = pod_from_template(
                    rspec["template"], namespace=meta.namespace, owner=owner,
                    name=f"{meta.name}-launcher",
                    labels={**base, REPLICA_TYPE: "launcher", JOB_ROLE: "master"})
                pod["spec"]["restartPolicy"] = _restart_policy(rspec, "Never")
                return pod
            groups.append(Group("the launcher", min(1, count(rspec, "replicas", path, 1)), launcher,
                                (obj,)))
        elif rtype == "Worker":
            def worker(i: int, rspec: Mapping[str, Any] = rspec) -> Pod:
                pod = pod_from_template(
                    rspec["template"], namespace=meta.namespace, owner=owner,
                    name=f"{meta.name}-worker-{i}",
                    labels={**base, REPLICA_TYPE: "worker", REPLICA_INDEX: str(i)})
                pod["spec"]["restartPolicy"] = _restart_policy(rspec, "Never")
                return pod
            groups.append(Group("the workers", count(rspec, "replicas", path, 0), worker,
                                (obj,)))
        else:
            raise WorkloadError(path, "an MPIJob has only Launcher and Worker replicas")
    return Expansion("MPIJob", meta.name, meta.namespace, tuple(groups))


EXPANSIONS: Expansions = {
    **{(GROUP, kind): expand_training_job for kind in KINDS},
    (GROUP, "MPIJob"): expand_mpijob,
}
