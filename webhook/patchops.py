"""RFC 6902 JSON Patch operations, as both halves write them: the webhook answers with
them, and the controller lifts gates and records decisions with them."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from webhook.memos import ShortMemo


class PatchOp(TypedDict):
    op: Literal["add", "remove", "replace", "test"]
    path: str
    value: NotRequired[Any]


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


# A map key as a JSON Pointer token; the same few keys recur on every request.
escape = ShortMemo(_escape, size=4096)
