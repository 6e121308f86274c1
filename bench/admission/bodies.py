"""Realistic AdmissionReview bodies, as the apiserver sends them for three kinds of pod."""

from __future__ import annotations

from typing import Any

import orjson


def _review(obj: dict[str, Any], uid: str) -> bytes:
    return orjson.dumps({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
            "requestResource": {"group": "", "version": "v1", "resource": "pods"},
            "namespace": obj["metadata"]["namespace"], "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator",
                         "uid": "5b0c2f9e-1f1c-4a8e-9d61-0c1c3f1e7a10",
                         "groups": ["system:serviceaccounts", "system:serviceaccounts:kubeflow",
                                    "system:authenticated"]},
            "object": obj, "oldObject": None, "dryRun": False,
            "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
        },
    })


def _common_spec(image: str, gpus: int, env: int) -> dict[str, Any]:
    return {
        "containers": [{
            "name": "main", "image": image,
            "command": ["torchrun", "--nnodes=8", "--nproc-per-node=8", "train.py"],
            "args": ["--config", "/etc/config/train.yaml", "--checkpoint-dir", "/ckpt"],
            "env": [{"name": f"ENV_VAR_{i}", "value": f"value-{i}-" + "x" * 24}
                    for i in range(env)],
            "ports": [{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
            "resources": {
                "limits": {"cpu": "96", "memory": "1800Gi", "nvidia.com/gpu": str(gpus)},
                "requests": {"cpu": "96", "memory": "1800Gi", "nvidia.com/gpu": str(gpus)},
            },
            "volumeMounts": [
                {"mountPath": "/dev/shm", "name": "dshm"},
                {"mountPath": "/ckpt", "name": "ckpt"},
                {"mountPath": "/var/run/secrets/kubernetes.io/serviceaccount",
                 "name": "kube-api-access-x7k2p", "readOnly": True},
            ],
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent",
        }],
        "volumes": [
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}},
            {"name": "ckpt", "persistentVolumeClaim": {"claimName": "checkpoints"}},
            {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {
                    "apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}},
        ],
        "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 30,
        "dnsPolicy": "ClusterFirst", "serviceAccountName": "default",
        "schedulerName": "default-scheduler", "enableServiceLinks": True,
        "securityContext": {}, "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists",
             "effect": "NoExecute", "tolerationSeconds": 300}],
    }


def training_worker() -> bytes:
    """An 8-GPU PyTorchJob worker (about 4 KB)."""
    meta = {
        "name": "llama-70b-worker-3", "namespace": "research",
        "labels": {"training.kubeflow.org/job-name": "llama-70b",
                   "training.kubeflow.org/operator-name": "pytorchjob-controller",
                   "training.kubeflow.org/replica-index": "3",
                   "training.kubeflow.org/replica-type": "worker"},
        "annotations": {"sidecar.istio.io/inject": "false"},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                             "name": "llama-70b", "uid": "0a4c5e8e-5d52-4a3e-8f39-2b7b1c9d1f00",
                             "controller": True, "blockOwnerDeletion": True}],
    }
    return _review({"kind": "Pod", "apiVersion": "v1", "metadata": meta,
                    "spec": _common_spec("nvcr.io/nvidia/pytorch:24.05-py3", 8, 22)}, "u-train")


def inference_pod() -> bytes:
    meta = {
        "generateName": "vllm-llama-7c9d8-", "namespace": "serving",
        "labels": {"app": "vllm-llama", "pod-template-hash": "7c9d8"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                             "name": "vllm-llama-7c9d8", "uid": "1b2c",
                             "controller": True, "blockOwnerDeletion": True}],
    }
    return _review({"kind": "Pod", "apiVersion": "v1", "metadata": meta,
                    "spec": _common_spec("vllm/vllm-openai:v0.6.3", 1, 6)}, "u-infer")


def out_of_scope_pod() -> bytes:
    spec = _common_spec("nginx:1.27", 0, 4)
    resources = spec["containers"][0]["resources"]
    for part in ("limits", "requests"):
        del resources[part]["nvidia.com/gpu"]
    meta = {"generateName": "web-6f7b9-", "namespace": "web",
            "labels": {"app": "web", "pod-template-hash": "6f7b9"}}
    return _review({"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec}, "u-web")


BODIES = {"training-8gpu": training_worker, "inference": inference_pod,
          "out-of-scope": out_of_scope_pod}
