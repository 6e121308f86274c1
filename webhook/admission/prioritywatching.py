"""The cluster's PriorityClasses, as a watch keeps them: what mutation writes beside a
`priorityClassName` it sets (webhook/admission/priorities.py), without a review ever
waiting on the apiserver.

Until the first list has arrived, and whenever the watch is failing, nothing is known:
a pod then gets today's patch (the class name, its stale priority removed) and the
Priority plugin fills the rest, at the price of a second call. A PriorityClass's value
and preemption policy are immutable, so what the watch saw of an object stays true while
it exists; only a class deleted and made again with another value, within the watch's lag,
could be written stale (docs/admission.md, "One call per pod")."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client

from webhook.admission.priorities import UNKNOWN, Priorities, Resolved, resolved
from webhook.kubewatch import watch
from webhook.reach import credentials

log = logging.getLogger("airlock.priorities")


class PriorityCache:
    def __init__(self, api: client.ApiClient) -> None:
        self.api = api
        self._known: dict[str, Resolved] = {}
        self._listed = False

    @property
    def known(self) -> Priorities:
        """What reviews may rely on: nothing before the first list."""
        return self._known if self._listed else UNKNOWN

    async def run(self) -> None:
        scheduling = client.SchedulingV1Api(self.api)
        await watch("PriorityClass", scheduling.list_priority_class, self._parse,
                    self._on_list, self._on_event, lost=self._lost)

    def _lost(self) -> None:
        # While the watch is not following, a class deleted and made again would go unseen.
        self._listed = False

    @staticmethod
    def _parse(obj: dict[str, Any]) -> tuple[str, Resolved] | None:
        return resolved(obj)

    def _on_list(self, items: list[tuple[str, Resolved] | None]) -> None:
        # A relist is swapped in whole: a class deleted while the watch was down is gone.
        self._known = dict(e for e in items if e is not None)
        self._listed = True

    def _on_event(self, change: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata")
        name = meta.get("name") if isinstance(meta, dict) else None
        if not isinstance(name, str):
            return
        found = resolved(obj)
        if change == "DELETED" or found is None:
            # An object this cannot read is as good as unknown: the plugin decides.
            self._known.pop(name, None)
        else:
            self._known[name] = found[1]


async def open_priorities(kubeconfig: Path | None) -> PriorityCache:
    """A cache with a client of its own (closed with the server)."""
    from webhook import kubeclient

    configuration = await credentials(
        kubeconfig, "--priority-classes kubernetes reads the cluster's PriorityClasses",
        "--priority-classes none")
    return PriorityCache(kubeclient.api_client(configuration, in_flight=2))
