"""The benches as the docs name them: every `python -m bench.NAME` written in the README,
CONTRIBUTING, docs/ and bench/ runs (a package with its `__main__`), and every bench has
its command in docs/benchmarks.md, the page of today's figures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import ROOT

DOCS = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "README.md",
        *sorted((ROOT / "docs").glob("*.md"))]
BENCHES = sorted(p.parent.name for p in (ROOT / "bench").glob("*/__main__.py"))
COMMAND = re.compile(r"python -m bench\.([a-z_]+)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_bench_command_in_the_docs_names_a_bench(doc: Path) -> None:
    named = set(COMMAND.findall(doc.read_text()))
    assert named <= set(BENCHES), f"no such bench: {sorted(named - set(BENCHES))}"


def test_every_bench_has_its_command_in_the_figures_page() -> None:
    assert {"admission", "controller", "peers", "soak"} <= set(BENCHES)
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    assert [b for b in BENCHES if f"python -m bench.{b}" not in page] == []
