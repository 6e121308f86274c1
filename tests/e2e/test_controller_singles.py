"""Single pods of classes that queue (training and scavenger by default) on the real
control plane: the real Job controller makes a scavenger pod, Airlock's webhook gates it,
and the controller admits it as a gang of one; a team's single pod over its queue's quota
stays gated and says why; an inference Deployment's pod is never gated."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import GPU, pod, policy_yaml, template, workload
from tests.kube import (
    Controllers,
    NamespaceFactory,
    PolicyFileFactory,
    all_bound,
    events,
    gated,
    pods_of,
    until,
)
from webhook.keys import CLASS_LABEL, PLACEMENT_ANNOTATION, QUEUED_ANNOTATION

pytestmark = pytest.mark.usefixtures("airlock")

# KWOK's own annotation: the pod succeeds after this run time on a fake node.
RUN_TIME = "pod-complete.stage.kwok.x-k8s.io/delay"


def marked(p: dict[str, Any]) -> bool:
    return (p["metadata"].get("annotations") or {}).get(QUEUED_ANNOTATION) == "true"


async def test_a_scavenger_jobs_pod_is_gated_then_admitted_and_runs(
        api: client.ApiClient, namespace: str, controllers: Controllers) -> None:
    job_template = template(gpus=1, restartPolicy="Never")
    job_template["metadata"] = {"annotations": {RUN_TIME: "3s"}}
    job = workload("batch/v1", "Job", "sweep", namespace, backoffLimit=0,
                   template=job_template)
    await client.BatchV1Api(api).create_namespaced_job(namespace, body=job)

    async def made() -> bool:
        return len(await pods_of(api, namespace, "sweep-")) == 1

    # No controller yet: the Job controller's pod waits behind Airlock's gate.
    await until(made)
    await asyncio.sleep(2)
    (waiting,) = await pods_of(api, namespace, "sweep-")
    assert gated(waiting)
    assert marked(waiting)
    assert waiting["metadata"]["labels"][CLASS_LABEL] == "scavenger"
    assert not waiting["spec"].get("nodeName")

    controllers.start()

    async def succeeded() -> bool:
        (p,) = await pods_of(api, namespace, "sweep-")
        return bool(p["status"].get("phase") == "Succeeded")

    await until(succeeded, within=60)
    (done,) = await pods_of(api, namespace, "sweep-")
    assert not gated(done)
    assert done["spec"]["nodeName"]
    # The decision is recorded on the pod itself.
    assert PLACEMENT_ANNOTATION in done["metadata"]["annotations"]
    assert any(m.startswith("Admitted: any domain; 1 pods, 1 GPUs")
               for m in await events(api, namespace, "sweep-"))


async def test_a_single_pod_over_its_queues_quota_stays_gated_and_says_why(
        api: client.ApiClient, namespaces: NamespaceFactory, controllers: Controllers,
        policy_file: PolicyFileFactory) -> None:
    first, second = await namespaces(), await namespaces()
    policy_file("91-queues.yaml", policy_yaml("e2e-single-queues", {"queues": [
        {"name": "first", "namespaces": [first], "nominal": {GPU: 8}},
        {"name": "second", "namespaces": [second], "nominal": {GPU: 8},
         "borrowingLimit": {GPU: 0}}]}))
    controllers.start()
    core = client.CoreV1Api(api)

    def single(name: str, gpus: int) -> dict[str, Any]:
        obj = pod(name).gpus(gpus).label(CLASS_LABEL, "scavenger").build()
        del obj["metadata"]["namespace"]
        return obj

    # The second team fills its nominal with one pod.
    await core.create_namespaced_pod(second, body=single("full", 8))

    async def bound(ns: str, name: str) -> bool:
        (p,) = await pods_of(api, ns, name)
        return bool(p["spec"].get("nodeName"))

    await until(lambda: bound(second, "full"), within=30)
    await core.create_namespaced_pod(second, body=single("more", 1))
    await core.create_namespaced_pod(first, body=single("mine", 1))
    why = "Waiting: queue second would use 9 GPUs: nominal 8, borrowing limit 0"

    async def told() -> bool:
        return why in await events(api, second, "more")

    await until(told, within=30)
    # The cluster has room: the first team's pod goes, the second's stays gated.
    await until(lambda: bound(first, "mine"), within=30)
    (more,) = await pods_of(api, second, "more")
    assert gated(more)
    assert not more["spec"].get("nodeName")


async def test_an_inference_deployments_pod_is_not_gated(
        api: client.ApiClient, namespace: str) -> None:
    deployment = workload(
        "apps/v1", "Deployment", "vllm", namespace, replicas=1,
        selector={"matchLabels": {"app": "vllm"}},
        template=template("vllm/vllm-openai:v0.6.3", gpus=1, labels={"app": "vllm"}))
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body=deployment)

    # No Airlock controller runs here: kube-scheduler binds it as it comes.
    await until(lambda: all_bound(api, namespace, "vllm-", 1), within=30)
    (p,) = await pods_of(api, namespace, "vllm-")
    assert p["metadata"]["labels"][CLASS_LABEL] == "inference"
    assert not gated(p)
    assert not marked(p)
