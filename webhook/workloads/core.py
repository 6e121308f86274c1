"""A bare Pod: it is its own workload."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.workloads.expansions import Context, Expansion, Group, Pod
from webhook.workloads.objects import mapping, text


def expand_pod(obj: Mapping[str, Any], _ctx: Context) -> Expansion:
    meta = mapping(obj, "metadata", ())
    name = text(meta, "name", ("metadata",)) or text(meta, "generateName", ("metadata",))
    namespace = text(meta, "namespace", ("metadata",)) or "default"

    def make(_: int) -> Pod:
        return dict(obj)

    return Expansion("Pod", name, namespace, (Group("pod", 1, make, (obj,)),))
