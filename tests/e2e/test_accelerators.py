"""An accelerator whose name has no `gpu` in it, end to end: a policy file adds
aws.amazon.com/neuron, the real apiserver's pre-filter (deploy/'s matchConditions) sends
neuron pods to the webhook, which classifies and gates them, and the controller (reading
the same policy) holds a 16-device gang until nodes that have neuron exist, then lets the
real kube-scheduler place it there."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import NEURON, pod, policy_yaml
from tests.kube import (
    Controllers,
    NodeFactory,
    PolicyFileFactory,
    dry_run,
    events,
    gated,
    pods_of,
    until,
)
from webhook.keys import ACCELERATORS_ANNOTATION, CLASS_LABEL
from webhook.sandbox.nodes import CLIQUE_LABEL, GPU, node_manifest

NEURON_NODES = ("trn-0000", "trn-0001")


def neuron_member(i: int) -> dict[str, Any]:
    obj = pod(f"trn-{i}").gpus(8, NEURON).gang("trn", 2).build()
    del obj["metadata"]["namespace"]  # the request's namespace decides
    return obj


def neuron_node(name: str) -> dict[str, Any]:
    """A Trainium node: 16 neuron devices, no NVIDIA GPU."""
    manifest = node_manifest(name, 0, {CLIQUE_LABEL: "trn-domain"}, "trn1.32xlarge",
                             taint=False)
    status = manifest["status"]
    resources = {k: v for k, v in status["allocatable"].items() if k != GPU}
    status["capacity"] = status["allocatable"] = {**resources, NEURON: "16"}
    labels = manifest["metadata"]["labels"]
    for key in ("nvidia.com/gpu.product", "nvidia.com/gpu.count"):
        del labels[key]
    return manifest


@pytest.mark.usefixtures("airlock")
async def test_a_neuron_gang_is_gated_and_goes_only_where_neuron_is(
        api: client.ApiClient, namespace: str, controllers: Controllers,
        policy_file: PolicyFileFactory, extra_nodes: NodeFactory) -> None:
    core = client.CoreV1Api(api)
    # Running before the policy changes: it reloads, as the webhook does.
    controller = controllers.start()
    added = policy_file("50-neuron.yaml",
                        policy_yaml("neuron", {"scope": {"accelerators": [NEURON]}}))

    async def classified() -> bool:
        labels = (await dry_run(api, namespace, neuron_member(0)))["metadata"].get("labels")
        return CLASS_LABEL in (labels or {})

    # The webhook polls its policy directory every 2 s.
    await until(classified, within=20)

    async def reloaded() -> bool:
        return any('"policy loaded"' in line and str(added) in line
                   for line in controller.log.read_text().splitlines())

    await until(reloaded, within=10)
    for i in range(2):
        await core.create_namespaced_pod(namespace, body=neuron_member(i))
    stored = await pods_of(api, namespace, "trn-")
    assert len(stored) == 2
    for p in stored:
        assert gated(p), p["metadata"]["name"]
        assert p["metadata"]["labels"][CLASS_LABEL] == "training"
        assert p["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == NEURON

    waiting = (f"Waiting: 2/2 pods present; needs 16 GPUs, and no node is eligible: none is "
               f"Ready, schedulable, has {NEURON}")

    async def told_why() -> bool:
        return any(m.startswith(waiting) for m in await events(api, namespace, "trn-"))

    # 8 nodes with 64 free NVIDIA GPUs, none with neuron: the gang waits, and says why.
    await until(told_why, within=30)
    assert all(gated(p) for p in await pods_of(api, namespace, "trn-"))

    await extra_nodes([neuron_node(n) for n in NEURON_NODES])

    async def placed() -> bool:
        pods = await pods_of(api, namespace, "trn-")
        return all(p["spec"].get("nodeName") for p in pods)

    await until(placed, within=30)
    assert {p["spec"]["nodeName"] for p in await pods_of(api, namespace, "trn-")} \
        <= set(NEURON_NODES)
    assert any(m.startswith("Admitted: domain trn-domain; 2 pods, 16 GPUs")
               for m in await events(api, namespace, "trn-"))
