"""Policy YAML read with the line of every value, so an error can say `file:line`.

PyYAML composes each document to nodes (which know their lines) before constructing
plain Python; walking the nodes gives a map from a path such as
`('spec', 'rules', 3, 'match')` to the line of that key, the same path pydantic reports
in a ValidationError's `loc`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

Loc = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True)
class Problem:
    file: str
    line: int | None  # None when the problem is the file or directory itself
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        return f"{where}: {self.message}"


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

    def where(self, loc: Loc) -> str:
        return f"{self.file}:{self.line(loc)}"


class _LineMap:
    """Walks one composed document, recording lines and the mistakes PyYAML lets by."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[Loc, int] = {}
        self.problems: list[Problem] = []
        # Nodes on the current path: an alias may point back up (`&a [*a]`).
        self._open: set[int] = set()

    def walk(self, node: yaml.Node, loc: Loc) -> None:
        if id(node) in self._open:
            self.problems.append(Problem(self.file, node.start_mark.line + 1,
                                         "an alias refers to its own anchor (a cycle)"))
            return
        self._open.add(id(node))
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            self._mapping(node, loc)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.walk(item, (*loc, i))
        self._open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, loc: Loc) -> None:
        merged: list[yaml.Node] = []
        first: dict[str, int] = {}
        for key, value in node.value:
            if key.tag == _MERGE_TAG:
                merged.append(value)
                continue
            name = str(key.value) if isinstance(key, yaml.ScalarNode) else "?"
            line = key.start_mark.line + 1
            # PyYAML keeps the last of two equal keys without a word: a second `rules:`
            # would silently drop the first list.
            if name in first:
                self.problems.append(Problem(
                    self.file, line, f"duplicate key {name!r} (first at line {first[name]})"))
                continue
            first[name] = line
            # A mapping entry points at its key, which is where a person looks for it.
            self.lines[(*loc, name)] = line
            self.walk(value, (*loc, name))
        # `<<: *base` entries sit under this mapping, but explicit keys override them.
        for value in merged:
            bases = value.value if isinstance(value, yaml.SequenceNode) else [value]
            for base in bases:
                if isinstance(base, yaml.MappingNode):
                    for key, item in base.value:
                        if isinstance(key, yaml.ScalarNode) and key.value not in first:
                            self.lines.setdefault((*loc, str(key.value)),
                                                  key.start_mark.line + 1)
                            self.walk(item, (*loc, str(key.value)))


def read_documents(path: Path, display: str | None = None) -> list[Document]:
    """Every YAML document in the file; PolicyError with the line on a syntax error."""
    name = display or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise PolicyError([Problem(name, None, f"cannot read: {e.strerror}")]) from None
    except UnicodeDecodeError as e:
        raise PolicyError([Problem(name, None, f"not UTF-8 text: {e.reason}")]) from None
    loader = yaml.SafeLoader(text)
    docs: list[Document] = []
    problems: list[Problem] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is None:
                continue
            walker = _LineMap(name)
            walker.walk(node, ())
            problems.extend(walker.problems)
            if not walker.problems:
                docs.append(Document(name, loader.construct_document(node), walker.lines,
                                     node.start_mark.line + 1))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        # The parser notices a mistake where it fails, often a line after it was made;
        # its context names where the unfinished construct began.
        context = ""
        if e.context and e.context_mark and e.context_mark is not mark:
            context = f" ({e.context} at line {e.context_mark.line + 1})"
        problems.append(Problem(name, mark.line + 1 if mark else 1,
                                f"invalid YAML: {e.problem or e}{context}"))
    except yaml.YAMLError as e:
        problems.append(Problem(name, 1, f"invalid YAML: {e}"))
    except RecursionError:
        problems.append(Problem(name, 1, "invalid YAML: nested too deeply"))
    finally:
        loader.dispose()
    if problems:
        raise PolicyError(problems)
    return docs
