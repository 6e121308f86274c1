"""The objects of a multi-document YAML (or JSON) text, each with the line it starts on and
the lines of its fields, so a malformed object is reported as `file:line`. A `kind: List`
counts as its items."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml

from webhook.workloads.objects import FieldPath


@dataclass(frozen=True, slots=True)
class Document:
    obj: Any
    line: int
    node: yaml.Node

    def line_of(self, path: FieldPath) -> int:
        """The line of the deepest field of `path` present in the text (1-based): where a
        field is missing, the line of the object that should hold it."""
        node, line = self.node, self.line
        for part in path:
            found = _entry(node, part)
            if found is None:
                break
            line, node = _line(found[0]), found[1]
        return line


def _entry(node: yaml.Node, part: str | int) -> tuple[yaml.Node, yaml.Node] | None:
    """(the node that names `part`, its value) in a mapping or sequence node."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == part:
                return key, value
        return None
    if isinstance(node, yaml.SequenceNode) and isinstance(part, int) \
            and 0 <= part < len(node.value):
        return node.value[part], node.value[part]
    return None


def _child(node: yaml.Node, part: str | int) -> yaml.Node | None:
    found = _entry(node, part)
    return None if found is None else found[1]


def parse_documents(text: str) -> Iterator[Document]:
    """The objects in `text`, in order; yaml.YAMLError (with its line) on bad YAML."""
    loader = yaml.SafeLoader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            obj = loader.construct_document(node)
            if isinstance(obj, dict) and obj.get("kind") == "List" \
                    and isinstance(obj.get("items"), list):
                items = _child(node, "items")
                for i, item in enumerate(obj["items"]):
                    item_node = _child(items, i) if items is not None else None
                    yield Document(item, _line(item_node or node), item_node or node)
            elif obj is not None:
                yield Document(obj, _line(node), node)
    finally:
        loader.dispose()


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1
