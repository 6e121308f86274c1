"""The demo waits for its CRD with `established`, on every shape the apiserver returns."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.sandbox.commands import established

NAMES = {"acceptedNames": {"kind": "PyTorchJob", "plural": "pytorchjobs"}}


@pytest.mark.parametrize(("crd", "served"), [
    ({}, False),
    ({"status": None}, False),
    ({"status": {"conditions": None, **NAMES}}, False),
    ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                {"type": "Established", "status": "False"}]}}, False),
    ({"status": {"conditions": [{"type": "NamesAccepted", "status": "True"},
                                {"type": "Established", "status": "True"}]}}, True),
])
def test_established(crd: dict[str, Any], served: bool) -> None:
    assert established(crd) is served
