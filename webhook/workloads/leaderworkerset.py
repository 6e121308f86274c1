"""LeaderWorkerSets, as sigs.k8s.io/lws v0.7.0 makes their pods: one leader StatefulSet
`<lws>` (pkg/controllers/leaderworkerset_controller.go
constructLeaderStatefulSetApplyConfiguration: worker-index 0, the size annotation), then
per leader a worker StatefulSet `<lws>-<group>` with ordinals from 1
(pkg/controllers/pod_controller.go constructWorkerStatefulSetApplyConfiguration), and the
pod webhook's labels and environment (pkg/webhooks/pod_webhook.go Default: group-index,
group-key, worker-index; pkg/utils/pod/pod_utils.go AddLWSVariables). The StatefulSet
controller adds its own labels (`apps`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from webhook.conventions.leaderworkerset import GROUP_INDEX_LABEL as GROUP_INDEX
from webhook.conventions.leaderworkerset import NAME_LABEL as NAME
from webhook.conventions.leaderworkerset import SIZE_ANNOTATION as SIZE
from webhook.workloads.apps import statefulset_pod
from webhook.workloads.expansions import Context, Expansion, Group, Pod
from webhook.workloads.objects import (
    Meta,
    WorkloadError,
    controller_reference,
    count,
    mapping,
    pod_template,
    required,
    stand_in_hash,
    text,
)
from webhook.workloads.templates import add_env, with_template

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
REVISION = "leaderworkerset.sigs.k8s.io/template-revision-hash"
LEADER_NAME = "leaderworkerset.sigs.k8s.io/leader-name"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBDOMAIN_POLICY = "leaderworkerset.sigs.k8s.io/subdomainPolicy"


def _group_key(namespace: str, leader: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


def expand_leaderworkerset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "LeaderWorkerSet")
    spec = mapping(obj, "spec", ())
    lwt = required(spec, "leaderWorkerTemplate", ("spec",), "a leaderWorkerTemplate")
    path = ("spec", "leaderWorkerTemplate")
    worker_template = pod_template(lwt, path, "workerTemplate")
    leader_template = (pod_template(lwt, path, "leaderTemplate")
                       if lwt.get("leaderTemplate") is not None else worker_template)
    replicas = count(spec, "replicas", ("spec",), 1)
    size = count(lwt, "size", path, 1)
    if size < 1:
        raise WorkloadError((*path, "size"), "must be at least 1 (the leader)")
    per_replica = text(mapping(spec, "networkConfig", ("spec",)), "subdomainPolicy",
                       ("spec", "networkConfig"), "Shared") == "UniquePerReplica"
    revision = stand_in_hash("LeaderWorkerSet", meta.namespace, meta.name)
    annotations = {SIZE: str(size)}
    if meta.annotations.get(EXCLUSIVE):
        annotations[EXCLUSIVE] = meta.annotations[EXCLUSIVE]

    def env(pod: Pod, group: int, worker: int) -> Pod:
        add_env(pod, [
            {"name": "LWS_LEADER_ADDRESS",
             "value": f"{meta.name}-{group}.{pod['spec'].get('subdomain', '')}.{meta.namespace}"},
            {"name": "LWS_GROUP_SIZE", "value": str(size)},
            {"name": "LWS_WORKER_INDEX", "value": str(worker)},
        ])
        return pod

    def leader(group: int) -> Pod:
        name = f"{meta.name}-{group}"
        template = with_template(
            leader_template, labels={WORKER_INDEX: "0", NAME: meta.name, REVISION: revision},
            annotations={**annotations,
                         **({SUBDOMAIN_POLICY: "UniquePerReplica"} if per_replica else {})})
        pod = statefulset_pod(
            template, set_name=meta.name, namespace=meta.namespace, ordinal=group,
            service_name=meta.name,
            owner=controller_reference("apps/v1", "StatefulSet", meta.namespace, meta.name),
            revision=f"{meta.name}-{revision}")
        pod["metadata"]["labels"].update({GROUP_INDEX: str(group),
                                          GROUP_KEY: _group_key(meta.namespace, name)})
        if per_replica:
            pod["spec"]["subdomain"] = name
        return env(pod, group, 0)

    def worker(i: int) -> Pod:
        group, index = divmod(i, size - 1)
        leader_name = f"{meta.name}-{group}"
        template = with_template(
            worker_template,
            labels={GROUP_INDEX: str(group), NAME: meta.name,
                    GROUP_KEY: _group_key(meta.namespace, leader_name), REVISION: revision},
            annotations={**annotations, LEADER_NAME: leader_name})
        pod = statefulset_pod(
            template, set_name=leader_name, namespace=meta.namespace, ordinal=index + 1,
            service_name=leader_name if per_replica else meta.name,
            owner=controller_reference("apps/v1", "StatefulSet", meta.namespace, leader_name),
            revision=f"{leader_name}-{revision}")
        pod["metadata"]["labels"][WORKER_INDEX] = str(index + 1)
        return env(pod, group, index + 1)

    groups = [Group("leaders", replicas, leader, (obj,))]
    if size > 1:
        groups.append(Group("workers", replicas * (size - 1), worker, (obj,)))
    return Expansion("LeaderWorkerSet", meta.name, meta.namespace, tuple(groups))
