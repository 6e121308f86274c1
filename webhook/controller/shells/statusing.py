"""`airlock status`: list the cluster once (kubeconfig or in-cluster), read the policy,
print `reporting`'s report."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from webhook.controller.core.objects import NodeInfo, PodInfo
from webhook.controller.core.records import Unverified
from webhook.controller.core.reporting import report
from webhook.controller.shells.raw import json_of
from webhook.controller.shells.remembering import recall
from webhook.controller.shells.running import connect
from webhook.keys import SYSTEM_NAMESPACE
from webhook.policy.loading import PolicyError, load_policy


async def _items(call: Any, **kwargs: Any) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    token = None
    while True:
        page = await json_of(await call(limit=500, _preload_content=False,
                                        **({"_continue": token} if token else {}), **kwargs))
        items += page.get("items") or []
        token = page["metadata"].get("continue")
        if not token:
            return items


async def _status(kubeconfig: Path | None, policies: Path, output: str) -> int:
    try:
        policy = load_policy(policies)
    except PolicyError as e:
        print(f"airlock status: the policy in {policies} is not valid:\n{e}", file=sys.stderr)
        return 1
    async with await connect(kubeconfig) as api:
        core = client.CoreV1Api(api)
        pods, nodes, events, kept = await asyncio.gather(
            _items(core.list_pod_for_all_namespaces), _items(core.list_node),
            _items(core.list_event_for_all_namespaces, field_selector="reason=Preempting"),
            recall(core, SYSTEM_NAMESPACE))
    found = report(policy, [NodeInfo.parse(n) for n in nodes],
                   [PodInfo.parse(p, Unverified()) for p in pods], events, time.time(),
                   kept)
    if output == "json":
        print(json.dumps(found.as_json(), indent=2))
    else:
        print(found.text(), end="")
    return 0


def run_status(kubeconfig: Path | None, policies: Path, output: str) -> int:
    return asyncio.run(_status(kubeconfig, policies, output))
