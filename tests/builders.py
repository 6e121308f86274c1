"""Object builders for tests: a realistic Pod in one line, varied with chained calls."""

from __future__ import annotations

import copy
from typing import Any

import yaml


class PodBuilder:
    def __init__(self, name: str = "worker-0", namespace: str = "ml") -> None:
        self.obj: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "containers": [{"name": "main", "image": "ghcr.io/acme/trainer:1.0"}],
            },
        }

    @property
    def meta(self) -> dict[str, Any]:
        meta: dict[str, Any] = self.obj["metadata"]
        return meta

    @property
    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = self.obj["spec"]
        return spec

    def label(self, key: str, value: str) -> PodBuilder:
        self.meta.setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> PodBuilder:
        self.meta.setdefault("annotations", {})[key] = value
        return self

    def owner(self, kind: str, name: str, api_version: str = "batch/v1") -> PodBuilder:
        self.meta.setdefault("ownerReferences", []).append(
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
             "controller": True, "blockOwnerDeletion": True})
        return self

    def gpus(self, n: int | str, resource: str = "nvidia.com/gpu",
             limit: int | str | None = None) -> PodBuilder:
        res = self.spec["containers"][0].setdefault("resources", {})
        res.setdefault("requests", {})[resource] = str(n)
        res.setdefault("limits", {})[resource] = str(n if limit is None else limit)
        return self

    def cpu(self, cpu: str = "4", memory: str = "16Gi") -> PodBuilder:
        res = self.spec["containers"][0].setdefault("resources", {})
        res.setdefault("requests", {}).update({"cpu": cpu, "memory": memory})
        return self

    def image(self, image: str) -> PodBuilder:
        self.spec["containers"][0]["image"] = image
        return self

    def set(self, key: str, value: Any) -> PodBuilder:
        self.spec[key] = value
        return self

    def gate(self, name: str) -> PodBuilder:
        self.spec.setdefault("schedulingGates", []).append({"name": name})
        return self

    def build(self) -> dict[str, Any]:
        return copy.deepcopy(self.obj)


def pod(name: str = "worker-0", namespace: str = "ml") -> PodBuilder:
    return PodBuilder(name, namespace)


def review(obj: Any, operation: str = "CREATE", old: Any = None, uid: str = "uid-1",
           username: str = "alice", namespace: str | None = None) -> dict[str, Any]:
    """An AdmissionReview as the apiserver sends it."""
    ns = namespace if namespace is not None else (
        (obj or old or {}).get("metadata", {}).get("namespace", "ml")
        if isinstance(obj or old, dict) else "ml")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": ns,
            "operation": operation,
            "userInfo": {"username": username, "groups": ["system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        },
    }


def policy_yaml(name: str, spec: dict[str, Any]) -> str:
    """One AirlockPolicy document, as a person would write it (block style)."""
    return yaml.safe_dump({"apiVersion": "gpu-airlock.io/v1alpha1", "kind": "AirlockPolicy",
                           "metadata": {"name": name}, "spec": spec}, sort_keys=False)
