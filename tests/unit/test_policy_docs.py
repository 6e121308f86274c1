"""The committed JSON Schema and the policy reference stay in step with the model."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from tests.paths import POLICIES, ROOT
from webhook.policy.model import PolicyFile
from webhook.policy.schema import BEGIN, END, reference_markdown, schema_text, splice_reference

FIX = "run: python -m webhook.policy.schema --write"


def test_committed_schema_is_current() -> None:
    assert (POLICIES / "schema.json").read_text() == schema_text(), FIX


def test_reference_tables_are_current() -> None:
    doc = (ROOT / "docs" / "policy-reference.md").read_text()
    assert splice_reference(doc) == doc, FIX


def test_reference_names_every_field() -> None:
    tables = reference_markdown()
    pending: list[type[BaseModel]] = [PolicyFile]
    while pending:
        model = pending.pop()
        assert model is PolicyFile or f"### {model.__name__}" in tables
        for name, field in model.model_fields.items():
            assert f"| `{field.alias or name}` |" in tables, f"{model.__name__}.{name}"
            pending += _models(field.annotation)


def _models(annotation: object) -> list[type[BaseModel]]:
    """The models a field's type names, through unions, tuples and dicts."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in getattr(annotation, "__args__", ()) for m in _models(arg)]


def test_splice_needs_the_markers() -> None:
    with pytest.raises(ValueError, match="markers"):
        splice_reference("# hand-written only\n")
    assert splice_reference(f"intro\n{BEGIN}\nold\n{END}\nend\n").startswith(
        f"intro\n{BEGIN}\n\n### AirlockPolicy")
