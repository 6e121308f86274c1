"""The controller's filters against the real kube-scheduler: both are asked, for hundreds
of (pod, node) pairs drawn from a fixed seed (tests/feasibility.py), whether the pod may
go to the node now. The controller re-implements the scheduler's node selectors, node
affinity, taints and tolerations, cordons and resource fit
(webhook/controller/core/cluster/filters.py, and the room its best fit checks): this is
what keeps the two from drifting apart unnoticed.

The scheduler is asked by creating the pod pinned to the node (a required matchFields
term on the node's name ANDed into each of its terms), ungated, in a namespace Airlock's
webhook ignores: bound is yes, PodScheduled=False (Unschedulable) is no. No pod can
preempt: all are of one priority, alone on the test's nodes. The controller is asked
through the code its rounds use, on the pod and nodes as the apiserver stored them. Pairs
are judged in rounds, one pod per node at a time, and the pods bound in earlier rounds
stay: the scheduler counts them, and the controller counts them as it does every bound
pod.

NotReady nodes: the scheduler reads only their taints (the node lifecycle controller's
not-ready taints) and binds a pod that tolerates them; the controller places nothing on a
NotReady node, on purpose (nothing would run there). So there the controller must refuse,
and the scheduler must agree with the controller's filter on the node taken as Ready."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
import uuid
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import snapshot
from tests.feasibility import (
    admits,
    as_member,
    kwok_managed,
    pinned,
    unpinned,
    varied_nodes,
    varied_pods,
)
from tests.kube import NamespaceFactory, NodeFactory, not_ready_nodes, until
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.resources import Resources
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.kuberaw import json_of
from webhook.operators.kubernetes.keys import NOT_READY_TAINT

SEED = 5
# 24 nodes x 32 pods: 768 pairs, in 32 rounds of one pod per node.
NODES, PODS = 24, 32
CORDONED, NOT_READY = 3, 3
ROUND = "agreement.example.com/round"


@dataclasses.dataclass(frozen=True)
class Judged:
    pod: str
    node: str
    scheduler: bool
    said: str  # the scheduler's message, when it would not
    controller: bool
    # On a NotReady node: the controller's answer were the node Ready.
    as_ready: bool | None
    member: PodInfo
    free: Resources

    @property
    def agrees(self) -> bool:
        if self.as_ready is None:
            return self.scheduler == self.controller
        return not self.controller and self.scheduler == self.as_ready


def _verdict(ok: bool) -> str:
    return "places" if ok else "refuses"


def _describe(j: Judged, node: NodeInfo) -> str:
    m = j.member

    def text(value: Any) -> str:
        return json.dumps(value, sort_keys=True, default=dict)

    readiness = "" if j.as_ready is None else f", and were the node Ready {_verdict(j.as_ready)}"
    return "\n".join([
        f"{j.pod} on {j.node}: the scheduler {_verdict(j.scheduler)}, the controller "
        f"{_verdict(j.controller)}{readiness}",
        f"  pod: nodeSelector {text(m.constraints.node_selector)}; required terms "
        f"{text(m.constraints.affinity_terms)}; tolerations {text(m.constraints.tolerations)}; "
        f"requests "
        f"{text(m.requests)}",
        f"  node: labels {text(node.labels)}; taints {text(node.taints)}; unschedulable "
        f"{node.unschedulable}; ready {node.ready}; allocatable {text(node.allocatable)}; "
        f"free before the round {text(j.free)}",
        *([f"  the scheduler said: {j.said}"] if j.said else [])])


async def _listed(api: client.ApiClient, label_selector: str = "", namespace: str = ""
                  ) -> list[dict[str, Any]]:
    core = client.CoreV1Api(api)
    response = await (core.list_namespaced_pod(namespace, label_selector=label_selector,
                                               _preload_content=False) if namespace else
                      core.list_pod_for_all_namespaces(_preload_content=False))
    items: list[dict[str, Any]] = (await json_of(response))["items"]
    return items


async def _nodes(api: client.ApiClient, names: set[str]) -> dict[str, NodeInfo]:
    listed = await json_of(await client.CoreV1Api(api).list_node(_preload_content=False))
    return {n["metadata"]["name"]: NodeInfo.parse(n) for n in listed["items"]
            if n["metadata"]["name"] in names}


def _state(node: NodeInfo) -> tuple[Any, ...]:
    """What decides where pods may go. Not when a taint was added, nor the not-ready
    NoExecute taint, which the node lifecycle controller takes off a node it first sees
    and puts back some seconds later: every pod tolerates it (the DefaultTolerationSeconds
    admission plugin adds the toleration), so it changes no verdict."""
    taints = sorted((t.get("key"), t.get("value"), t.get("effect")) for t in node.taints
                    if (t.get("key"), t.get("effect")) != (NOT_READY_TAINT, "NoExecute"))
    return node.labels, taints, node.unschedulable, node.ready, node.allocatable


async def _verdicts(api: client.ApiClient, ns: str, round_: int, names: set[str]
                    ) -> dict[str, tuple[str | None, str]]:
    """Each pod of the round: the node it was bound to, or None and why not."""
    found: dict[str, tuple[str | None, str]] = {}

    async def decided() -> bool:
        for p in await _listed(api, f"{ROUND}={round_}", ns):
            name = p["metadata"]["name"]
            if p["spec"].get("nodeName"):
                found[name] = (p["spec"]["nodeName"], "")
                continue
            for c in p["status"].get("conditions") or ():
                if c["type"] == "PodScheduled" and c["status"] == "False" and \
                        c.get("reason") == "Unschedulable":
                    found[name] = (None, c.get("message", ""))
        return set(found) >= names

    try:
        await until(decided, within=60)
    except AssertionError:
        raise AssertionError(f"round {round_}: no verdict of the scheduler within 60 s on "
                             f"{sorted(names - set(found))}") from None
    return found


async def _round(api: client.ApiClient, ns: str, round_: int, pairs: list[tuple[str, str]],
                 written: Mapping[str, dict[str, Any]], nodes: dict[str, NodeInfo]
                 ) -> list[Judged]:
    core = client.CoreV1Api(api)
    bound = [PodInfo.parse(p) for p in await _listed(api)
             if p["spec"].get("nodeName") in nodes]
    snap = snapshot(nodes.values(), bound)
    as_ready = snapshot([dataclasses.replace(n, ready=True) for n in nodes.values()], bound)
    bodies = {}
    for name, node in pairs:
        body = pinned(written[name], node)
        body["metadata"]["name"] = f"r{round_:02d}-{name}"
        body["metadata"]["labels"] = {ROUND: str(round_)}
        bodies[body["metadata"]["name"]] = body

    async def create(body: dict[str, Any]) -> dict[str, Any]:
        return await json_of(await core.create_namespaced_pod(ns, body=body,
                                                              _preload_content=False))

    stored = await asyncio.gather(*(create(b) for b in bodies.values()))
    verdicts = await _verdicts(api, ns, round_, set(bodies))
    # The pods the scheduler refused would hold nothing, but are retried as the cluster
    # changes: gone, none of them can land in a later round.
    await asyncio.gather(*(core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
                           for name, (node, _) in verdicts.items() if node is None))
    judged = []
    for (name, node), obj in zip(pairs, stored, strict=True):
        member = as_member(unpinned(obj, written[name]))
        landed, said = verdicts[obj["metadata"]["name"]]
        assert landed in (None, node), f"{obj['metadata']['name']} pinned to {node} " \
                                       f"was bound to {landed}"
        judged.append(Judged(
            name, node, landed is not None, said, admits(snap, member, node),
            None if nodes[node].ready else admits(as_ready, member, node),
            member, snap.free[node]))
    return judged


@pytest.mark.parametrize("seed", [SEED])
async def test_the_controllers_filters_agree_with_kube_scheduler(
        api: client.ApiClient, namespaces: NamespaceFactory, extra_nodes: NodeFactory,
        seed: int) -> None:
    started = time.monotonic()
    rng = random.Random(seed)
    prefix = f"agree-{uuid.uuid4().hex[:6]}"
    manifests = varied_nodes(rng, prefix, NODES, CORDONED, NOT_READY)
    names = [n["metadata"]["name"] for n in manifests]
    written = {p["metadata"]["name"]: p for p in varied_pods(rng, PODS, names)}
    print(f"seed {seed}: {NODES} nodes, {PODS} pods")
    ns = await namespaces(labels={IGNORE_NAMESPACE_LABEL: "true"})
    await extra_nodes([n for n in manifests if kwok_managed(n)])
    judged: list[Judged] = []
    async with not_ready_nodes(api, [n for n in manifests if not kwok_managed(n)]):
        nodes = await _nodes(api, set(names))
        assert sum(not n.ready for n in nodes.values()) == NOT_READY
        pods = list(written)
        for round_ in range(PODS):
            pairs = [(pods[(i + round_) % PODS], node) for i, node in enumerate(names)]
            judged += await _round(api, ns, round_, pairs, written, nodes)
        after = await _nodes(api, set(names))
    changed = [f"{n}: {_state(nodes[n])} then {_state(after[n])}" for n in names
               if _state(nodes[n]) != _state(after[n])]
    assert len(changed) == 0, f"seed {seed}: nodes changed while pairs were judged, so " \
                              f"the verdicts are not comparable:\n" + "\n".join(changed)

    placed = sum(j.scheduler for j in judged)
    unready = sum(j.as_ready is not None for j in judged)
    print(f"seed {seed}: {len(judged)} pairs in {time.monotonic() - started:.1f} s: the "
          f"scheduler placed {placed} and refused {len(judged) - placed}; {unready} on "
          f"NotReady nodes, of which the scheduler placed "
          f"{sum(j.scheduler for j in judged if j.as_ready is not None)}")
    disagreements = [j for j in judged if not j.agrees]
    assert len(disagreements) == 0, (
        f"seed {seed}: {len(disagreements)} of {len(judged)} pairs judged differently:\n"
        + "\n".join(_describe(j, nodes[j.node]) for j in disagreements))
