"""LeaderWorkerSets, as sigs.k8s.io/lws v0.7.0 makes their pods: one leader StatefulSet
`<lws>` (pkg/controllers/leaderworkerset_controller.go
constructLeaderStatefulSetApplyConfiguration: worker-index 0, the size annotation), then
per leader a worker StatefulSet `<lws>-<group>` with ordinals from 1
(pkg/controllers/pod_controller.go constructWorkerStatefulSetApplyConfiguration), and the
pod webhook's labels and environment (pkg/webhooks/pod_webhook.go Default: group-index,
group-key, worker-index; pkg/utils/pod/pod_utils.go AddLWSVariables). The StatefulSet
controller adds its own labels (`webhook.operators.kubernetes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from webhook.operators.kubernetes.making import statefulset_pod
from webhook.operators.leaderworkerset.keys import (
    EXCLUSIVE,
    GROUP_INDEX_LABEL,
    GROUP_KEY,
    LEADER_NAME,
    NAME_LABEL,
    REVISION,
    SIZE_ANNOTATION,
    SUBDOMAIN_POLICY,
    WORKER_INDEX,
)
from webhook.workloads.expansions import Context, Expansion, Expansions, Group, Pod
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


def _group_key(namespace: str, leader: str) -> str:
    return hashlib.sha1(f"{namespace}/{leader}".encode()).hexdigest()


class _LeaderWorkerSet:
    """What every pod of a LeaderWorkerSet shares, read (and checked) in the order the
    fields are reported; `leader` and `worker` make the i-th of each."""

    def __init__(self, obj: Mapping[str, Any]) -> None:
        self.meta = meta = Meta(obj, "LeaderWorkerSet")
        spec = mapping(obj, "spec", ())
        lwt = required(spec, "leaderWorkerTemplate", ("spec",), "a leaderWorkerTemplate")
        path = ("spec", "leaderWorkerTemplate")
        self.worker_template = pod_template(lwt, path, "workerTemplate")
        self.leader_template = (pod_template(lwt, path, "leaderTemplate")
                                if lwt.get("leaderTemplate") is not None
                                else self.worker_template)
        self.replicas = count(spec, "replicas", ("spec",), 1)
        self.size = count(lwt, "size", path, 1)
        if self.size < 1:
            raise WorkloadError((*path, "size"), "must be at least 1 (the leader)")
        self.per_replica = text(mapping(spec, "networkConfig", ("spec",)), "subdomainPolicy",
                                ("spec", "networkConfig"), "Shared") == "UniquePerReplica"
        self.revision = stand_in_hash("LeaderWorkerSet", meta.namespace, meta.name)
        self.annotations = {SIZE_ANNOTATION: str(self.size)}
        if meta.annotations.get(EXCLUSIVE):
            self.annotations[EXCLUSIVE] = meta.annotations[EXCLUSIVE]

    def _env(self, pod: Pod, group: int, worker: int) -> Pod:
        meta = self.meta
        add_env(pod, [
            {"name": "LWS_LEADER_ADDRESS",
             "value": f"{meta.name}-{group}.{pod['spec'].get('subdomain', '')}.{meta.namespace}"},
            {"name": "LWS_GROUP_SIZE", "value": str(self.size)},
            {"name": "LWS_WORKER_INDEX", "value": str(worker)},
        ])
        return pod

    def leader(self, group: int) -> Pod:
        meta = self.meta
        name = f"{meta.name}-{group}"
        template = with_template(
            self.leader_template,
            labels={WORKER_INDEX: "0", NAME_LABEL: meta.name, REVISION: self.revision},
            annotations={**self.annotations,
                         **({SUBDOMAIN_POLICY: "UniquePerReplica"} if self.per_replica else {})})
        pod = statefulset_pod(
            template, set_name=meta.name, namespace=meta.namespace, ordinal=group,
            service_name=meta.name,
            owner=controller_reference("apps/v1", "StatefulSet", meta.namespace, meta.name),
            revision=f"{meta.name}-{self.revision}")
        pod["metadata"]["labels"].update({GROUP_INDEX_LABEL: str(group),
                                          GROUP_KEY: _group_key(meta.namespace, name)})
        if self.per_replica:
            pod["spec"]["subdomain"] = name
        return self._env(pod, group, 0)

    def worker(self, i: int) -> Pod:
        meta = self.meta
        group, index = divmod(i, self.size - 1)
        leader_name = f"{meta.name}-{group}"
        template = with_template(
            self.worker_template,
            labels={GROUP_INDEX_LABEL: str(group), NAME_LABEL: meta.name,
                    GROUP_KEY: _group_key(meta.namespace, leader_name), REVISION: self.revision},
            annotations={**self.annotations, LEADER_NAME: leader_name})
        pod = statefulset_pod(
            template, set_name=leader_name, namespace=meta.namespace, ordinal=index + 1,
            service_name=leader_name if self.per_replica else meta.name,
            owner=controller_reference("apps/v1", "StatefulSet", meta.namespace, leader_name),
            revision=f"{leader_name}-{self.revision}")
        pod["metadata"]["labels"][WORKER_INDEX] = str(index + 1)
        return self._env(pod, group, index + 1)


def expand_leaderworkerset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    lws = _LeaderWorkerSet(obj)
    groups = [Group("leaders", lws.replicas, lws.leader, (obj,))]
    if lws.size > 1:
        groups.append(Group("workers", lws.replicas * (lws.size - 1), lws.worker, (obj,)))
    return Expansion("LeaderWorkerSet", lws.meta.name, lws.meta.namespace, tuple(groups))


EXPANSIONS: Expansions = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): expand_leaderworkerset,
}
