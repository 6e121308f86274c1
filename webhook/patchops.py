"""RFC 6902 JSON Patch operations, as both halves write them: the webhook answers with
them, and the controller lifts gates and records decisions with them."""

from __future__ import annotations

import functools
from typing import Any, Literal, NotRequired, TypedDict


class PatchOp(TypedDict):
    op: Literal["add", "remove", "replace", "test"]
    path: str
    value: NotRequired[Any]


@functools.cache
def escape(key: str) -> str:
    """A map key as a JSON Pointer token; the same few keys recur on every request."""
    return key.replace("~", "~0").replace("/", "~1")
