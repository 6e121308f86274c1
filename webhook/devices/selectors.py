"""The device attribute values a claim request's CEL selectors require: how a pod names
GPU models through DRA, e.g.

    device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"

Airlock evaluates no CEL: the real scheduler's allocator does. It reads only what it needs
to know which models a request allows: comparisons of one attribute with string literals,
`==` or `in [...]`, joined by `&&`, in any of the request's selectors (which all must
hold). An expression with any other logic (`||`, `!`, `?:`) says nothing here: the request
then allows every model as far as Airlock knows, and the allocator still enforces it.

Read within bounds: the text of a selector past the apiserver's own limit for a CEL
expression is not read, nor selectors past the first few."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Attribute (qualified: `domain/name`) -> the values it may have, sorted: hashable, so
# parsed asks compare equal when a claim is seen again unchanged.
Selection = tuple[tuple[str, tuple[str, ...]], ...]

MAX_EXPRESSION = 10 * 1024
MAX_SELECTORS = 32

_STRING = r"""(?:"[^"\\]*"|'[^'\\]*')"""
_ATTRIBUTE = re.compile(
    rf"""device\.attributes\[\s*(?P<domain>{_STRING})\s*\]"""
    rf"""(?:\.(?P<name>[A-Za-z_][A-Za-z0-9_]*)|\[\s*(?P<key>{_STRING})\s*\])""")
# What may stand beside the attribute: `== "v"` after it, `"v" ==` before it, or
# `in ["v", ...]` after it.
_EQUALS = re.compile(rf"\s*==\s*({_STRING})\s*")
_EQUALED = re.compile(rf"\s*({_STRING})\s*==\s*")
_AMONG = re.compile(rf"\s+in\s*\[\s*({_STRING}(?:\s*,\s*{_STRING})*)\s*\]\s*")
_LITERAL = re.compile(_STRING)
# Logic that can make one comparison not required of every device the request takes.
_OTHER_LOGIC = re.compile(r"\|\||\?|!(?!=)")


def _unquoted(literal: str) -> str:
    return literal[1:-1]


def _comparison(text: str) -> tuple[str, set[str]] | None:
    """`attribute == "v"`, `"v" == attribute` or `attribute in ["v", ...]`, in brackets
    or not: the attribute and its values."""
    text = text.strip().lstrip("(").rstrip(")")
    found = _ATTRIBUTE.search(text)
    if found is None:
        return None
    before, after = text[:found.start()], text[found.end():]
    literals = (_EQUALS.fullmatch(after) or _AMONG.fullmatch(after)) if not before.strip() \
        else _EQUALED.fullmatch(before) if not after.strip() else None
    if literals is None:
        return None
    name = found["name"] or _unquoted(found["key"])
    return (f"{_unquoted(found['domain'])}/{name}",
            {_unquoted(v) for v in _LITERAL.findall(literals[1])})


def _expression(text: str) -> dict[str, set[str]]:
    """What one expression requires; nothing where it is not a plain conjunction."""
    if len(text) > MAX_EXPRESSION or _OTHER_LOGIC.search(text):
        return {}
    required: dict[str, set[str]] = {}
    for part in text.split("&&"):
        comparison = _comparison(part)
        if comparison is not None:
            attribute, values = comparison
            required[attribute] = required.get(attribute, values) & values
    return required


def selection(request: Mapping[str, Any]) -> Selection:
    """The attribute values every device a request (or a `firstAvailable` alternative)
    takes must have, by its CEL selectors."""
    selectors = request.get("selectors")
    required: dict[str, set[str]] = {}
    for selector in selectors[:MAX_SELECTORS] if isinstance(selectors, list) else ():
        cel = selector.get("cel") if isinstance(selector, Mapping) else None
        text = cel.get("expression") if isinstance(cel, Mapping) else None
        if not isinstance(text, str):
            continue
        for attribute, values in _expression(text).items():
            required[attribute] = required.get(attribute, values) & values
    return tuple(sorted((a, tuple(sorted(v))) for a, v in required.items()))
