"""The one place RFC 6902 operations are written.

Mutation asks for changes in terms of the pod ("set this label", "append this
toleration"); the builder knows whether the parent exists and how to escape a key.
Building ops directly is far cheaper on the hot path than copying the pod and diffing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, NotRequired, TypedDict


class PatchOp(TypedDict):
    op: Literal["add", "remove", "replace", "test"]
    path: str
    value: NotRequired[Any]


def pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


class PatchBuilder:
    def __init__(self, pod: Mapping[str, Any]) -> None:
        self._meta: Mapping[str, Any] = pod.get("metadata") or {}
        self._spec: Mapping[str, Any] = pod.get("spec") or {}
        self.ops: list[PatchOp] = []
        # Maps and lists this patch has created, so a second entry appends to them.
        self._created: set[str] = set()

    def _set_in_map(self, section: str, parent: Mapping[str, Any], key: str,
                    value: Any) -> None:
        path = pointer(*section.split("/"))
        if parent.get(key) == value:
            return
        if key in parent:
            self.ops.append({"op": "replace", "path": pointer(*section.split("/"), key),
                             "value": value})
        elif parent or path in self._created:
            self.ops.append({"op": "add", "path": pointer(*section.split("/"), key),
                             "value": value})
        else:
            self.ops.append({"op": "add", "path": path, "value": {key: value}})
            self._created.add(path)

    def label(self, key: str, value: str) -> None:
        self._set_in_map("metadata/labels", self._meta.get("labels") or {}, key, value)

    def annotation(self, key: str, value: str) -> None:
        self._set_in_map("metadata/annotations", self._meta.get("annotations") or {}, key, value)

    def spec_field(self, key: str, value: Any) -> None:
        self._set_in_map("spec", self._spec, key, value)

    def remove_spec_field(self, key: str) -> None:
        if key in self._spec:
            self.ops.append({"op": "remove", "path": pointer("spec", key)})

    def append(self, field: str, item: Any) -> None:
        """Append to a spec list, creating it when the pod has none."""
        path = pointer("spec", field)
        if self._spec.get(field) or path in self._created:
            self.ops.append({"op": "add", "path": path + "/-", "value": item})
        else:
            self.ops.append({"op": "add", "path": path, "value": [item]})
            self._created.add(path)

    def replace(self, path: str, value: Any) -> None:
        self.ops.append({"op": "add", "path": path, "value": value})
