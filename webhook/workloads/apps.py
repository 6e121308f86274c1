"""Deployments, ReplicaSets and StatefulSets, as kube-controller-manager v1.34 makes their
pods (k8s.io/kubernetes v1.34.4):
- Deployment: pkg/controller/deployment/sync.go getNewReplicaSet (the ReplicaSet
  `<name>-<pod-template-hash>`, the hash label added to its template);
- ReplicaSet: pkg/controller/replicaset/replica_set.go via controller.GetPodFromTemplate
  (generateName `<replicaset>-`);
- StatefulSet: pkg/controller/statefulset/stateful_set_utils.go newVersionedStatefulSetPod
  (`<name>-<ordinal>`, pod-name, pod-index and controller-revision-hash labels, hostname
  and subdomain, a volume per claim template);
- DaemonSet: pkg/controller/daemon/util/daemonset_util.go CreatePodTemplate (the
  revision and template-generation labels, the tolerations every daemon pod gets) and
  ReplaceDaemonSetPodNodeNameNodeAffinity (each pod pinned to its node); one pod stands
  for all, as explain knows no nodes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.workloads.expansions import Context, Expansion, Group, Pod, regroup
from webhook.workloads.objects import (
    Meta,
    count,
    mapping,
    objects,
    pod_template,
    stand_in_hash,
    text,
)
from webhook.workloads.templates import pod_from_template, with_template

POD_TEMPLATE_HASH = "pod-template-hash"
STS_POD_NAME = "statefulset.kubernetes.io/pod-name"
POD_INDEX = "apps.kubernetes.io/pod-index"
REVISION_HASH = "controller-revision-hash"


def expand_replicaset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "ReplicaSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    owner = meta.owner_reference()

    def make(_: int) -> Pod:
        return pod_from_template(template, namespace=meta.namespace, owner=owner,
                                 generate_name=f"{meta.name}-")

    return Expansion("ReplicaSet", meta.name, meta.namespace,
                     (Group("the pod template", replicas, make, (obj,)),))


def expand_deployment(obj: Mapping[str, Any], ctx: Context) -> Expansion:
    meta = Meta(obj, "Deployment")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    pod_hash = stand_in_hash("Deployment", meta.namespace, meta.name, length=10)
    # The ReplicaSet name is cut so that `-<hash>` fits a DNS subdomain (253).
    rs_name = f"{meta.name[:253 - 1 - len(pod_hash)]}-{pod_hash}"
    rs_template = with_template(template, labels={POD_TEMPLATE_HASH: pod_hash})
    replicaset = {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": rs_name, "namespace": meta.namespace,
                     "labels": rs_template["metadata"]["labels"],
                     "ownerReferences": [meta.owner_reference()]},
        "spec": {"replicas": replicas, "template": rs_template},
    }
    notes = ("paused: the rollout waits until it is resumed",) if spec.get("paused") else ()
    return regroup(expand_replicaset(replicaset, ctx), "Deployment", meta.name, obj, notes)


def statefulset_pod(template: Mapping[str, Any], *, set_name: str, namespace: str,
                    ordinal: int, service_name: str, revision: str,
                    owner: Mapping[str, Any],
                    claims: list[Mapping[str, Any]] | None = None) -> Pod:
    """newStatefulSetPod + initIdentity + updateStorage + setPodRevision (the pod keeps the
    generateName GetPodFromTemplate gives it before it is named)."""
    name = f"{set_name}-{ordinal}"
    pod = pod_from_template(template, namespace=namespace, owner=owner, name=name,
                            generate_name=f"{set_name}-",
                            labels={STS_POD_NAME: name, POD_INDEX: str(ordinal),
                                    REVISION_HASH: revision})
    spec = pod["spec"]
    spec["hostname"] = name
    if service_name:
        spec["subdomain"] = service_name
    if claims:
        names = {c["metadata"]["name"] for c in claims}
        spec["volumes"] = [
            {"name": c["metadata"]["name"], "persistentVolumeClaim": {
                "claimName": f"{c['metadata']['name']}-{set_name}-{ordinal}"}}
            for c in claims
        ] + [v for v in spec.get("volumes") or [] if v.get("name") not in names]
    return pod


def expand_statefulset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "StatefulSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    replicas = count(spec, "replicas", ("spec",), 1)
    start = count(mapping(spec, "ordinals", ("spec",)), "start", ("spec", "ordinals"), 0)
    service = text(spec, "serviceName", ("spec",))
    claims = [c for c in objects(spec, "volumeClaimTemplates", ("spec",))
              if isinstance(c.get("metadata"), dict) and c["metadata"].get("name")]
    revision = f"{meta.name}-{stand_in_hash('StatefulSet', meta.namespace, meta.name)}"
    owner = meta.owner_reference()

    def make(i: int) -> Pod:
        return statefulset_pod(template, set_name=meta.name, namespace=meta.namespace,
                               ordinal=start + i, service_name=service, revision=revision,
                               owner=owner, claims=claims)

    return Expansion("StatefulSet", meta.name, meta.namespace,
                     (Group("the pod template", replicas, make, (obj,)),))


TEMPLATE_GENERATION = "pod-template-generation"
# AddOrUpdateDaemonPodTolerations: (taint, effect), and the one only host-network pods get.
DAEMON_TOLERATIONS = (
    ("node.kubernetes.io/not-ready", "NoExecute"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
    ("node.kubernetes.io/disk-pressure", "NoSchedule"),
    ("node.kubernetes.io/memory-pressure", "NoSchedule"),
    ("node.kubernetes.io/pid-pressure", "NoSchedule"),
    ("node.kubernetes.io/unschedulable", "NoSchedule"),
)
HOST_NETWORK_TOLERATION = ("node.kubernetes.io/network-unavailable", "NoSchedule")
EACH_NODE = "<each eligible node>"


def expand_daemonset(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = Meta(obj, "DaemonSet")
    spec = mapping(obj, "spec", ())
    template = pod_template(spec, ("spec",))
    generation = count(mapping(obj, "metadata", ()), "generation", ("metadata",), 1)
    labels = {REVISION_HASH: stand_in_hash("DaemonSet", meta.namespace, meta.name),
              TEMPLATE_GENERATION: str(generation)}
    owner = meta.owner_reference()

    def make(_: int) -> Pod:
        pod = pod_from_template(template, namespace=meta.namespace, owner=owner,
                                generate_name=f"{meta.name}-", labels=labels)
        pod_spec = pod["spec"]
        wanted = [*DAEMON_TOLERATIONS,
                  *([HOST_NETWORK_TOLERATION] if pod_spec.get("hostNetwork") else [])]
        tolerations = list(pod_spec.get("tolerations") or [])
        have = {(t.get("key"), t.get("effect")) for t in tolerations}
        pod_spec["tolerations"] = tolerations + [
            {"key": key, "operator": "Exists", "effect": effect}
            for key, effect in wanted if (key, effect) not in have]
        affinity = pod_spec.setdefault("affinity", {})
        affinity["nodeAffinity"] = {**(affinity.get("nodeAffinity") or {}),
                                    "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [EACH_NODE]}]}]}}
        return pod

    return Expansion("DaemonSet", meta.name, meta.namespace,
                     (Group("the pod template", 1, make, (obj,)),),
                     ("one pod per eligible node; the one shown stands for all",))
