"""A new operator is one folder and one registration: a folder under webhook/operators/
that reads pods or makes them joins through its `integration` module, built from that
folder's halves only; the registry lists each folder's integration once, and nothing else
imports one; and reading an operator's pods loads nothing that only explain needs."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import webhook
from webhook.conventions.base import Convention, OwnerSized, SizeUnknown
from webhook.operators.integrations import Integration
from webhook.operators.registry import CONVENTIONS, INTEGRATIONS

PACKAGE = Path(webhook.__file__).parent
OPERATORS_DIR = PACKAGE / "operators"
FOLDERS = sorted(p.name for p in OPERATORS_DIR.iterdir() if (p / "__init__.py").is_file())
# The halves that make a folder an integration; a folder without them only holds the keys
# of an operator Airlock marks pods for but does not read (Karpenter, the autoscaler).
HALVES = ("reading", "making")


def _has(folder: str, module: str) -> bool:
    return (OPERATORS_DIR / folder / f"{module}.py").is_file()


INTEGRATED = [f for f in FOLDERS if any(_has(f, half) for half in HALVES)]


def _integration(folder: str) -> Integration:
    found = importlib.import_module(f"webhook.operators.{folder}.integration").INTEGRATION
    assert isinstance(found, Integration)
    return found


def test_the_folders_are_seen() -> None:
    assert {"jobset", "kubernetes", "airlock"} <= set(INTEGRATED)
    assert {"karpenter", "clusterautoscaler"} <= set(FOLDERS) - set(INTEGRATED)


@pytest.mark.parametrize("folder", FOLDERS)
def test_a_folder_that_reads_or_makes_pods_is_registered_once(folder: str) -> None:
    if folder not in INTEGRATED:
        assert {p.stem for p in (OPERATORS_DIR / folder).glob("*.py")} == {"__init__", "keys"}
        return
    assert sum(i is _integration(folder) for i in INTEGRATIONS) == 1


def test_the_registry_lists_the_folders_integrations_and_nothing_else() -> None:
    assert len(INTEGRATIONS) == len(INTEGRATED)
    assert {id(i) for i in INTEGRATIONS} == {id(_integration(f)) for f in INTEGRATED}


def _imports(path: Path) -> set[str]:
    """The modules `path` imports, `from a import b` counted as a.b too."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_only_the_registry_imports_an_integration() -> None:
    integrations = {f"webhook.operators.{f}.integration" for f in FOLDERS}
    importers = {str(path.relative_to(PACKAGE.parent)) for path in PACKAGE.rglob("*.py")
                 if _imports(path) & integrations}
    assert importers == {"webhook/operators/registry.py"}


@pytest.mark.parametrize("folder", INTEGRATED)
def test_an_integration_is_its_own_folders_halves(folder: str) -> None:
    integration = _integration(folder)
    assert integration.conventions or integration.expansions
    home = f"webhook.operators.{folder}"
    assert {type(c).__module__ for c in integration.conventions} <= {f"{home}.reading"}
    assert {e.__module__ for e in integration.expansions.values()} <= {f"{home}.making"}
    assert all(isinstance(c, Convention) for c in integration.conventions)
    assert all(isinstance(group, str) and isinstance(kind, str) and kind
               for group, kind in integration.expansions)


def test_each_convention_names_its_own_gang_source() -> None:
    names = [c.name for c in CONVENTIONS]
    assert all(names)
    assert len(names) == len(set(names))


@pytest.mark.parametrize("convention", [c for c in CONVENTIONS if isinstance(c, OwnerSized)],
                         ids=lambda c: c.name)
def test_an_owner_lookup_answers_for_a_pod_that_names_no_owner(convention: OwnerSized) -> None:
    assert isinstance(convention.owner({}, []), SizeUnknown)


def test_reading_an_operators_pods_loads_nothing_only_explain_needs() -> None:
    """At run time, not only in import-linter's graph: importing a module imports its
    package first, so a folder's `__init__` that joined the halves would load `making`
    on the webhook's and the controller's every import of `reading` or `keys`."""
    readers = [f"webhook.operators.{f}.{m}" for f in FOLDERS for m in ("keys", "reading")
               if _has(f, m)]
    script = "; ".join([
        "import sys", *(f"import {m}" for m in readers),
        "print(' '.join(m for m in sys.modules if m.startswith('webhook.workloads') or "
        "m.startswith('webhook.operators.') and m.rpartition('.')[2] in "
        "('making', 'integration', 'integrations', 'registry', 'sizing')))"])
    loaded = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True,
                            text=True, cwd=PACKAGE.parent).stdout.split()
    assert readers
    assert not loaded
