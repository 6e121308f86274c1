"""No module of webhook/ or bench/ runs over the style's 400 lines, and no function over
60: past that a module holds more than one thing (a function more than one step), and
splitting it where its parts come apart keeps each one readable whole. Tests are not
held to it (a table of cases may run long)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import ROOT

LIMIT = 400
COVERED = ("webhook", "bench")


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _modules() -> dict[str, int]:
    return {path.relative_to(ROOT).as_posix(): _lines(path)
            for folder in COVERED for path in sorted((ROOT / folder).rglob("*.py"))}


def test_no_module_runs_over_the_limit() -> None:
    over = [f"{name}: {lines} lines" for name, lines in _modules().items()
            if lines > LIMIT]
    assert over == [], f"over {LIMIT} lines; split each where its parts come apart: {over}"


FUNCTION_LIMIT = 60


def _long_functions() -> list[str]:
    found = []
    for folder in COVERED:
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > FUNCTION_LIMIT:
                        found.append(f"{path.relative_to(ROOT).as_posix()}:{node.lineno} "
                                     f"{node.name}: {lines} lines")
    return found


def test_no_function_runs_over_the_limit() -> None:
    """A function past a screen holds more than one step; its decorators and docstring
    count, as a reader reads them."""
    over = _long_functions()
    assert over == [], f"over {FUNCTION_LIMIT} lines; split each into named steps: {over}"
