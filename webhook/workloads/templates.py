"""A pod from a pod template, as the controllers make one (controller.GetPodFromTemplate in
k8s.io/kubernetes pkg/controller/controller_utils.go, which the operators copy): the
template's labels, annotations, finalizers and spec, the controller's reference, and the
name or generateName the controller chose."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from webhook.workloads.expansions import Pod
from webhook.workloads.objects import generated_name


def pod_from_template(
    template: Mapping[str, Any], *, namespace: str, owner: Mapping[str, Any],
    name: str | None = None, generate_name: str | None = None,
    labels: Mapping[str, str] | None = None, annotations: Mapping[str, str] | None = None,
) -> Pod:
    """The pod a controller creates. With only a generateName, the pod carries no name,
    as the mutating webhooks see it (the apiserver names it after mutating admission);
    `display_name` gives the name the reader sees. A StatefulSet's pods have both."""
    meta = template.get("metadata") or {}
    pod_meta: dict[str, Any] = {"namespace": namespace}
    if name:
        pod_meta["name"] = name
    if generate_name:
        pod_meta["generateName"] = generate_name
    pod_meta["labels"] = {**(meta.get("labels") or {}), **(labels or {})}
    pod_meta["annotations"] = {**(meta.get("annotations") or {}), **(annotations or {})}
    if meta.get("finalizers"):
        pod_meta["finalizers"] = list(meta["finalizers"])
    pod_meta["ownerReferences"] = [dict(owner)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta,
            "spec": copy.deepcopy(dict(template.get("spec") or {}))}


def with_template(template: Mapping[str, Any], *, labels: Mapping[str, str] | None = None,
                  annotations: Mapping[str, str] | None = None,
                  spec: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A copy of a pod template with labels, annotations and spec fields set over it (what
    a controller does to the template of an object it creates)."""
    out = copy.deepcopy(dict(template))
    meta = out.setdefault("metadata", {}) or {}
    out["metadata"] = meta
    if labels:
        meta["labels"] = {**(meta.get("labels") or {}), **labels}
    if annotations:
        meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    if spec:
        out["spec"] = {**(out.get("spec") or {}), **spec}
    return out


def add_env(pod: Pod, env: Iterable[Mapping[str, Any]]) -> None:
    """Add environment variables to every container and init container that does not set
    them already (what the Job controller and LeaderWorkerSet's pod webhook do)."""
    env = list(env)
    for key in ("containers", "initContainers"):
        for container in pod["spec"].get(key) or []:
            have = {e.get("name") for e in container.get("env") or []}
            container["env"] = list(container.get("env") or []) + [
                dict(e) for e in env if e["name"] not in have]


def display_name(pod: Mapping[str, Any], *parts: str) -> str:
    """The pod's name, or the one the apiserver would generate (stand-in suffix)."""
    meta = pod.get("metadata") or {}
    if meta.get("name"):
        return str(meta["name"])
    return generated_name(str(meta.get("generateName") or ""), *parts)
