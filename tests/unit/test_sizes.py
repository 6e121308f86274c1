"""No module of webhook/ or bench/ runs over the style's 400 lines: past that a module
holds more than one thing, and splitting it where its parts come apart keeps each one
readable whole. Tests are not held to it (a table of cases may run long)."""

from __future__ import annotations

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
