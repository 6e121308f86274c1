"""What a running sandbox shows: examples/demo's workloads created in it, and the table of
every pod (class, priority, gate, status, node, domain) that `airlock sandbox status` and
`up --demo` print, read once the pods settle."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.keys import CLASS_LABEL, GATE
from webhook.sandbox import wiring
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo"


# Serving first, as in a cluster where it already runs; then batch, then the gang. The
# Deployment's and the Job's pods need only Kubernetes' own controllers: `up --demo`
# creates them while the operators start. The training-operator makes the gang's.
WITHOUT_OPERATORS = ("inference-deployment.yaml", "scavenger-job.yaml")
WITH_OPERATORS = ("training-pytorchjob.yaml",)
DEMO_FILES = (*WITHOUT_OPERATORS, *WITH_OPERATORS)


def _demo_docs(files: tuple[str, ...]) -> list[dict[str, Any]]:
    return [d for f in files for d in yaml.safe_load_all((DEMO / f).read_text()) if d]


def demo_pods(files: tuple[str, ...] = DEMO_FILES) -> int:
    """How many pods the objects of examples/demo's `files` make: a table read before an
    operator has made a gang's pods would show the rest settled and the gang missing."""
    def pods(doc: dict[str, Any]) -> int:
        spec = doc["spec"]
        if doc["kind"] == "Deployment":
            return int(spec.get("replicas", 1))
        if doc["kind"] == "Job":
            return int(spec.get("completions", 1))
        return sum(int(r.get("replicas", 1)) for r in spec["pytorchReplicaSpecs"].values())
    return sum(map(pods, _demo_docs(files)))


async def create_demo(kubeconfig: Path, files: tuple[str, ...] = DEMO_FILES) -> None:
    """The objects of examples/demo's `files`, in their namespaces (one there already is
    left as it is)."""
    docs = _demo_docs(files)
    async with await from_kubeconfig(kubeconfig) as api:
        await asyncio.gather(*(wiring.create_namespace(api, ns) for ns in
                               dict.fromkeys(d["metadata"]["namespace"] for d in docs)))
        for doc in docs:
            kind, meta = doc["kind"], doc["metadata"]
            try:
                if kind == "Deployment":
                    await client.AppsV1Api(api).create_namespaced_deployment(
                        meta["namespace"], body=doc)
                elif kind == "Job":
                    await client.BatchV1Api(api).create_namespaced_job(
                        meta["namespace"], body=doc)
                else:
                    await client.CustomObjectsApi(api).create_namespaced_custom_object(
                        "kubeflow.org", "v1", meta["namespace"], "pytorchjobs", doc)
            except ApiException as e:
                if e.status != 409:
                    raise


def settled(pods: list[dict[str, Any]], jobs: list[dict[str, Any]], expected: int = 1) -> bool:
    """At least `expected` pods, every one on a node and out of Pending, and every Job
    finished: the moment the demo's table is worth reading."""
    finished = ("Complete", "Failed")
    return len(pods) >= max(expected, 1) and all(
        p["spec"].get("nodeName") and (p.get("status") or {}).get("phase") != "Pending"
        for p in pods) and all(
        any(c["type"] in finished and c["status"] == "True"
            for c in (j.get("status") or {}).get("conditions") or []) for j in jobs)


async def _settled_pods(api: client.ApiClient, within: float,
                        expected: int) -> list[dict[str, Any]]:
    """Every pod, once all have settled or after `within` seconds, whichever comes
    first: a table read at once would show a moment of the controllers' work."""
    core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
    deadline = time.monotonic() + within
    while True:
        pods: list[dict[str, Any]] = (await (await core.list_pod_for_all_namespaces(
            _preload_content=False)).json())["items"]
        jobs = (await (await batch.list_job_for_all_namespaces(
            _preload_content=False)).json())["items"]
        if settled(pods, jobs, expected):
            return pods
        if time.monotonic() >= deadline:
            if within:
                print(f"not every pod is running (or every Job done) after {within:g}s; "
                      "the table shows why (kubectl get events -A tells more)",
                      file=sys.stderr)
            return pods
        await asyncio.sleep(0.2)


def phase(pod: dict[str, Any]) -> str:
    """What `kubectl get pods` calls STATUS, as far as a fake node's pod goes."""
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if any(g["name"] == GATE for g in pod["spec"].get("schedulingGates", [])):
        return "SchedulingGated"
    return str((pod.get("status") or {}).get("phase") or "Pending")


async def pods_table(kubeconfig: Path, within: float = 0.0, expected: int = 1) -> str:
    async with await from_kubeconfig(kubeconfig) as api:
        pods = await _settled_pods(api, within, expected)
        nodes = {n["metadata"]["name"]: n["metadata"].get("labels", {}) for n in (
            await (await client.CoreV1Api(api).list_node(_preload_content=False)).json()
        )["items"]}
    rows = [("POD", "CLASS", "PRIORITY", "GATED", "STATUS", "NODE", "DOMAIN (nvlink / block)")]
    for p in sorted(pods, key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"])):
        meta, spec = p["metadata"], p["spec"]
        node = spec.get("nodeName") or "-"
        labels = nodes.get(node, {})
        domain = f"{labels.get(CLIQUE_LABEL, '-')} / {labels.get(BLOCK_LABEL, '-')}" \
            if node != "-" else "-"
        gated = "yes" if any(g["name"] == GATE for g in spec.get("schedulingGates", [])) \
            else "no"
        rows.append((f"{meta['namespace']}/{meta['name']}",
                     (meta.get("labels") or {}).get(CLASS_LABEL, "-"),
                     f"{spec.get('priorityClassName') or '-'} ({spec.get('priority', 0)})",
                     gated, phase(p), node, domain))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)
