"""`airlock record`: watch a live cluster's GPU pods for as long as told, or read the
controller's lifecycle log, and write the trace `airlock simulate` replays. And the
nodes of a live cluster as pools, for `airlock simulate --cluster-from`.

The watch is the controller's own list-then-watch (`kubewatch`), its pods fed to the
lifecycle the controller logs from (`controller.core.lifecycle`): both ways of recording
make the same events, folded the same way (`folding`)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException
from kubernetes_asyncio.config import ConfigException

from webhook import kubeclient
from webhook.controller.core.identities import PodKey
from webhook.controller.core.lifecycle import Lifecycle, LifeEvent, gpu_model
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.kubewatch import watch
from webhook.policy.gpumodels import model_of
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy
from webhook.pools import Pool, PoolError
from webhook.recording.folding import MAX_LINE, RecordError, fold, parse_log, trace_lines
from webhook.recording.pooling import pools_of_nodes
from webhook.values import Refused, duration


def _seconds(text: str) -> int:
    found = duration("--for", text)
    if isinstance(found, Refused):
        raise argparse.ArgumentTypeError(found.message)
    return found


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--for", dest="duration", type=_seconds, metavar="DURATION",
                        help="watch the cluster's GPU pods this long (e.g. 90s, 2h, 1h30m)")
    source.add_argument("--from-log", type=Path, metavar="FILE",
                        help="read the controller's lifecycle log (its JSON lines; other "
                             "lines are passed over) instead of watching")
    parser.add_argument("--kubeconfig", type=Path, default=None,
                        help="kubeconfig file (default: in-cluster, then ~/.kube/config)")
    parser.add_argument("--context", default=None, help="the kubeconfig's context to use")
    parser.add_argument("--policies", type=Path, default=None,
                        help="the policy the cluster runs: which resources are GPUs, and "
                             "its GPU models (default: ./policies, else the shipped one)")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="FILE",
                        help="write the trace here (default: stdout)")


def _lines(path: Path) -> Iterator[str]:
    """The file's lines, none longer than the reader takes (`folding` refuses those)."""
    with path.open(encoding="utf-8", errors="replace") as f:
        while line := f.readline(MAX_LINE):
            yield line


class _Following:
    """The pods and nodes as the watches tell them, the pods fed to a lifecycle, its
    events kept."""

    def __init__(self, policy: Policy) -> None:
        self.models = policy.gpu_models
        self.nodes: dict[str, NodeInfo] = {}
        self.lifecycle = Lifecycle(policy.counted().count, self.model)
        self.events: list[LifeEvent] = []

    def model(self, name: str) -> str | None:
        labels = self.nodes[name].labels if name in self.nodes else {}
        return gpu_model(model_of(self.models, labels), labels)

    def pods_listed(self, listed: list[PodInfo]) -> None:
        keys = {p.key for p in listed}
        for key in [k for k in self.lifecycle.followed() if k not in keys]:
            self.events.extend(self.lifecycle.drop(key, time.time()))
        for pod in listed:
            self.events.extend(self.lifecycle.put(pod, time.time()))

    def pod_changed(self, kind: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = PodKey(meta.get("namespace", ""), meta.get("name", ""))
        self.events.extend(self.lifecycle.drop(key, time.time()) if kind == "DELETED"
                           else self.lifecycle.put(PodInfo.parse(obj), time.time()))

    def nodes_listed(self, listed: list[NodeInfo]) -> None:
        self.nodes = {n.name: n for n in listed}

    def node_changed(self, kind: str, obj: dict[str, Any]) -> None:
        node = NodeInfo.parse(obj)
        if kind == "DELETED":
            self.nodes.pop(node.name, None)
        else:
            self.nodes[node.name] = node


async def _watched(kubeconfig: Path | None, context: str | None, policy: Policy,
                   seconds: float) -> tuple[list[LifeEvent], float]:
    """The lifecycle events of what the cluster's pods do for `seconds` from when they
    are listed, and when the watching ended."""
    configuration = await kubeclient.load_configuration(kubeconfig, context)
    following = _Following(policy)
    async with kubeclient.api_client(configuration) as api:
        core = client.CoreV1Api(api)
        nodes_ready, pods_ready = asyncio.Event(), asyncio.Event()
        tasks = [asyncio.create_task(watch("nodes", core.list_node, NodeInfo.parse,
                                           following.nodes_listed, following.node_changed,
                                           nodes_ready))]
        # Nodes first: a pod running when listed is of its node's model.
        await nodes_ready.wait()
        tasks.append(asyncio.create_task(watch(
            "pods", core.list_pod_for_all_namespaces, PodInfo.parse, following.pods_listed,
            following.pod_changed, pods_ready)))
        await pods_ready.wait()
        print(f"recording the GPU pods of {configuration.host} for {seconds:g} s",
              file=sys.stderr, flush=True)
        await asyncio.sleep(seconds)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return following.events, time.time()


def _write(lines: Iterator[str], out: TextIO) -> int:
    count = 0
    for line in lines:
        out.write(line)
        count += not line.startswith("#")
    return count


def run_record(args: argparse.Namespace) -> int:
    try:
        policy = load_policy(args.policies)
    except PolicyError as e:
        print(f"policy in {args.policies} is invalid:\n{e}", file=sys.stderr)
        return 1
    try:
        if args.from_log is not None:
            runs, until = fold(parse_log(_lines(args.from_log), str(args.from_log)))
        else:
            events, until = asyncio.run(_watched(args.kubeconfig, args.context, policy,
                                                 args.duration))
            runs, _ = fold(events)
    except OSError as e:
        print(f"{args.from_log}: cannot read it: {e.strerror}", file=sys.stderr)
        return 1
    except RecordError as e:
        print(e, file=sys.stderr)
        return 1
    with contextlib.ExitStack() as stack:
        out = sys.stdout if args.output is None else \
            stack.enter_context(args.output.open("w", encoding="utf-8"))
        jobs = _write(trace_lines(runs, until), out)
    print(f"recorded {jobs} jobs ({len(runs)} gangs and pods seen)", file=sys.stderr)
    return 0


# --- simulate --cluster-from -------------------------------------------------------------

async def _nodes(kubeconfig: Path, context: str | None) -> list[NodeInfo]:
    configuration = await kubeclient.load_configuration(kubeconfig, context)
    async with kubeclient.api_client(configuration) as api:
        listed = await client.CoreV1Api(api).list_node(_preload_content=False)
        return [NodeInfo.parse(item) for item in (await listed.json()).get("items") or ()]


def live_pools(kubeconfig: Path, context: str | None = None) -> tuple[Pool, ...]:
    """The pools of the cluster `kubeconfig` (its `context`, else its current one)
    reaches; PoolError saying why there are none."""
    try:
        nodes = asyncio.run(_nodes(kubeconfig, context))
    except (ApiException, OSError, ConfigException) as e:
        raise PoolError(f"{kubeconfig}: cannot list the cluster's nodes: {e}") from None
    return pools_of_nodes(nodes, f"the nodes of {kubeconfig}")
