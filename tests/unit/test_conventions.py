"""The gang conventions keep to themselves: each label or annotation key a convention
reads is written only in its own module, so a new operator is one file."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import webhook
from tests.builders import pod
from webhook.conventions.base import Convention
from webhook.conventions.registry import CONVENTIONS
from webhook.pods import PodView

PACKAGE = Path(webhook.__file__).parent


def _module_of(convention: object) -> str:
    return type(convention).__module__


def _keys(path: Path) -> set[str]:
    """The module's own key constants: module-level strings shaped like `domain/name`."""
    return {node.value.value for node in ast.parse(path.read_text()).body
            if isinstance(node, ast.Assign | ast.AnnAssign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            and "/" in node.value.value and "." in node.value.value.split("/")[0]}


def _path(module: str) -> Path:
    return PACKAGE.parent / Path(*module.split(".")).with_suffix(".py")


def _literals(path: Path) -> set[str]:
    return {node.value for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def test_the_key_finder_sees_the_keys() -> None:
    assert _keys(_path("webhook.conventions.jobset")) == {
        "jobset.sigs.k8s.io/jobset-name", "jobset.sigs.k8s.io/replicatedjob-name"}


@pytest.mark.parametrize("module", sorted({_module_of(c) for c in CONVENTIONS}))
def test_a_conventions_keys_appear_only_in_its_module(module: str) -> None:
    home = _path(module)
    keys = _keys(home)
    elsewhere = {
        f"{path.relative_to(PACKAGE.parent)}: {key}"
        for path in PACKAGE.rglob("*.py") if path != home
        for literal in _literals(path) for key in keys if key in literal
    }
    assert not elsewhere


def _carrying(keys: dict[str, str]) -> PodView:
    """A pod with each key as both a label and an annotation."""
    obj = pod().build()
    obj["metadata"]["labels"] = obj["metadata"]["annotations"] = keys
    return PodView.parse(obj)


@pytest.mark.parametrize("convention", CONVENTIONS, ids=lambda c: c.name)
def test_a_convention_finds_no_gang_without_its_label(convention: Convention) -> None:
    """The registry asks a convention only about pods with its label; this holds only if
    the convention itself finds nothing without it, whatever else the pod carries."""
    keys = {key: "1" for c in CONVENTIONS
            for key in (c.label, *_keys(_path(_module_of(c))))}
    assert convention.detect(_carrying(keys)) is not None
    del keys[convention.label]
    assert convention.detect(_carrying(keys)) is None
