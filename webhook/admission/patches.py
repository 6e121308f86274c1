"""The one place RFC 6902 operations are written.

Mutation asks for changes in terms of the pod ("set this label", "append this
toleration"); the builder knows whether the parent exists and how to escape a key.
Building ops directly is far cheaper on the hot path than copying the pod and diffing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from webhook.patchops import PatchOp, escape


class PatchBuilder:
    """Collects changes to a pod, then writes them as the fewest operations: a map or
    list the pod lacks is added whole, one it has is extended entry by entry."""

    def __init__(self, pod: Mapping[str, Any]) -> None:
        meta: Mapping[str, Any] = pod.get("metadata") or {}
        self._spec: Mapping[str, Any] = pod.get("spec") or {}
        self._had_labels: Mapping[str, str] = meta.get("labels") or {}
        self._had_annotations: Mapping[str, str] = meta.get("annotations") or {}
        self._ops: list[PatchOp] = []
        self._labels: dict[str, str] = {}
        self._annotations: dict[str, str] = {}
        self._appends: dict[str, list[Any]] = {}
        self._node_selector: dict[str, str] = {}

    def label(self, key: str, value: str) -> None:
        if self._had_labels.get(key) != value:
            self._labels[key] = value

    def annotation(self, key: str, value: str) -> None:
        if self._had_annotations.get(key) != value:
            self._annotations[key] = value

    def spec_field(self, key: str, value: Any) -> None:
        if key not in self._spec:
            self._ops.append({"op": "add", "path": f"/spec/{escape(key)}", "value": value})
        elif self._spec[key] != value:
            self._ops.append({"op": "replace", "path": f"/spec/{escape(key)}", "value": value})

    def remove_spec_field(self, key: str) -> None:
        if key in self._spec:
            self._ops.append({"op": "remove", "path": f"/spec/{escape(key)}"})

    def append(self, field: str, item: Any) -> None:
        """Append to a spec list, creating it when the pod has none."""
        self._appends.setdefault(field, []).append(item)

    def _map_ops(self, path: str, parent: Mapping[str, Any], changes: dict[str, Any]) -> None:
        if not changes:
            return
        if not parent:
            self._ops.append({"op": "add", "path": path, "value": changes})
            return
        for key, value in changes.items():
            op: Literal["add", "replace"] = "replace" if key in parent else "add"
            self._ops.append({"op": op, "path": f"{path}/{escape(key)}", "value": value})

    def ops(self) -> list[PatchOp]:
        self._map_ops("/metadata/labels", self._had_labels, self._labels)
        self._map_ops("/metadata/annotations", self._had_annotations, self._annotations)
        self._map_ops("/spec/nodeSelector", self._spec.get("nodeSelector") or {},
                      self._node_selector)
        for field, items in self._appends.items():
            path = f"/spec/{escape(field)}"
            if self._spec.get(field):
                self._ops.extend({"op": "add", "path": path + "/-", "value": i} for i in items)
            else:
                self._ops.append({"op": "add", "path": path, "value": items})
        return self._ops

    def node_selector(self, key: str, value: str) -> None:
        if (self._spec.get("nodeSelector") or {}).get(key) != value:
            self._node_selector[key] = value

    def swap_resource(self, field: str, index: int, section: str, old: str, new: str,
                      value: Any) -> None:
        """In container `index` of spec.`field`, resources.`section` (requests or
        limits) loses `old` and gains `new`: `value`."""
        path = f"/spec/{field}/{index}/resources/{section}/"
        self._ops.append({"op": "remove", "path": path + escape(old)})
        self._ops.append({"op": "add", "path": path + escape(new), "value": value})
