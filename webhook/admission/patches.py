"""The one place RFC 6902 operations are written.

Mutation asks for changes in terms of the pod ("set this label", "append this
toleration"); the builder knows whether the parent exists and how to escape a key.
Building ops directly is far cheaper on the hot path than copying the pod and diffing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.patchops import PatchOp, escape


class PatchBuilder:
    """Collects changes to a pod, then writes them as the fewest operations: a map or
    list the pod lacks is added whole, one it has is extended entry by entry.

    An entry of a map the pod has becomes its operation at once; only what is added whole
    waits for `ops`. Each step here runs several times on every admission request."""

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
        # Labels and annotations set (or found as wanted), which `strip` leaves.
        self._set: set[str] = set()

    def label(self, key: str, value: str) -> None:
        self._set.add(key)
        self._entry("/metadata/labels/", self._had_labels, self._labels, key, value)

    def annotation(self, key: str, value: str) -> None:
        self._set.add(key)
        self._entry("/metadata/annotations/", self._had_annotations, self._annotations, key,
                    value)

    def strip(self, prefix: str, chosen: Callable[[str], bool]) -> None:
        """Remove the pod's labels and annotations under `prefix` that are `chosen` and
        were not set. Call it after setting: what is set is what stays."""
        for path, had in (("/metadata/labels/", self._had_labels),
                          ("/metadata/annotations/", self._had_annotations)):
            for key in had:
                if key.startswith(prefix) and key not in self._set and chosen(key):
                    self._ops.append({"op": "remove", "path": path + escape(key)})

    def node_selector(self, key: str, value: str) -> None:
        self._entry("/spec/nodeSelector/", self._spec.get("nodeSelector") or {},
                    self._node_selector, key, value)

    def _entry(self, path: str, had: Mapping[str, str], whole: dict[str, str], key: str,
               value: str) -> None:
        """`key` of the map at `path`, which holds `had`, set to `value`: an operation of
        its own, or, when the pod has no such map, part of `whole`, added by `ops`."""
        if had.get(key) != value:
            if had:
                self._ops.append({"op": "replace" if key in had else "add",
                                  "path": path + escape(key), "value": value})
            else:
                whole[key] = value

    def spec_field(self, key: str, value: Any) -> None:
        if key not in self._spec:
            self._ops.append({"op": "add", "path": "/spec/" + escape(key), "value": value})
        elif self._spec[key] != value:
            self._ops.append({"op": "replace", "path": "/spec/" + escape(key), "value": value})

    def remove_spec_field(self, key: str) -> None:
        if key in self._spec:
            self._ops.append({"op": "remove", "path": "/spec/" + escape(key)})

    def append(self, field: str, item: Any) -> None:
        """Append to a spec list, creating it when the pod has none."""
        self._appends.setdefault(field, []).append(item)

    def swap_resource(self, field: str, index: int, section: str, old: str, new: str,
                      value: Any) -> None:
        """In container `index` of spec.`field`, resources.`section` (requests or
        limits) loses `old` and gains `new`: `value`."""
        path = f"/spec/{field}/{index}/resources/{section}/"
        self._ops.append({"op": "remove", "path": path + escape(old)})
        self._ops.append({"op": "add", "path": path + escape(new), "value": value})

    def ops(self) -> list[PatchOp]:
        ops = self._ops
        if self._labels:
            ops.append({"op": "add", "path": "/metadata/labels", "value": self._labels})
        if self._annotations:
            ops.append({"op": "add", "path": "/metadata/annotations",
                        "value": self._annotations})
        if self._node_selector:
            ops.append({"op": "add", "path": "/spec/nodeSelector", "value": self._node_selector})
        for field, items in self._appends.items():
            path = "/spec/" + escape(field)
            if self._spec.get(field):
                for item in items:
                    ops.append({"op": "add", "path": path + "/-", "value": item})
            else:
                ops.append({"op": "add", "path": path, "value": items})
        return ops
