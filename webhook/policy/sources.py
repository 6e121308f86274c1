"""Policy YAML read with the line of every value, so an error can say `file:line`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Loc = tuple[str | int, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


class PolicyError(Exception):
    """One or more problems in the policy files; str() lists them as `file:line: msg`."""

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__("\n".join(map(str, problems)))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class Document:
    file: str
    data: Any
    lines: dict[Loc, int] = field(default_factory=dict)
    start_line: int = 1

    def line(self, loc: Loc) -> int:
        """The line of the deepest part of `loc` the document has."""
        for end in range(len(loc), 0, -1):
            found = self.lines.get(loc[:end])
            if found is not None:
                return found
        return self.start_line


def _walk(node: yaml.Node, loc: Loc, lines: dict[Loc, int]) -> None:
    # A mapping entry points at its key, which is where a person looks for it.
    lines.setdefault(loc, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else str(key.start_mark.line)
            lines[(*loc, name)] = key.start_mark.line + 1
            _walk(value, (*loc, name), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*loc, i), lines)


def read_documents(path: Path, display: str | None = None) -> list[Document]:
    """Every YAML document in the file; PolicyError with the line on a syntax error."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise PolicyError([Problem(name, 1, f"cannot read: {e}")]) from None
    loader = yaml.SafeLoader(text)
    docs = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            lines: dict[Loc, int] = {}
            _walk(node, (), lines)
            docs.append(Document(name, loader.construct_document(node), lines,
                                 node.start_mark.line + 1))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = mark.line + 1 if mark else 1
        raise PolicyError([Problem(name, line, f"invalid YAML: {e.problem or e}")]) from None
    except yaml.YAMLError as e:
        raise PolicyError([Problem(name, 1, f"invalid YAML: {e}")]) from None
    finally:
        loader.dispose()
    return docs
