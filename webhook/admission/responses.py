"""Every admission response comes from these constructors, and `complete` is the one
place a response becomes wire format (uid copied, patch encoded, warnings trimmed)."""

from __future__ import annotations

import binascii

import orjson

from webhook.admission.reviews import (
    REVIEW_API_VERSION,
    Outcome,
    Response,
    ResponseBody,
    ReviewBody,
)
from webhook.patchops import PatchOp

# The apiserver truncates long warnings; keep them readable instead.
_MAX_WARNING = 120
_PATCH_FIELDS = b',"patchType":"JSONPatch","patch":"'

# The constructors below pass Response's fields by position: keyword arguments to a
# NamedTuple are matched name by name, which costs more than building it.


def allowed(warnings: tuple[str, ...] = (), outcome: Outcome | None = None) -> Response:
    return Response(True, None, 200, (), warnings, outcome)


def patched(patch: list[PatchOp], warnings: tuple[str, ...], outcome: Outcome) -> Response:
    return Response(True, None, 200, tuple(patch), warnings, outcome)


def denied(message: str, outcome: Outcome | None = None, code: int = 403) -> Response:
    return Response(allowed=False, message=message, code=code, outcome=outcome)


def errored(message: str, outcome: Outcome | None) -> Response:
    return Response(allowed=False, message=message, code=500, outcome=outcome)


def _short(warning: str) -> str:
    return warning if len(warning) <= _MAX_WARNING else warning[: _MAX_WARNING - 1] + "…"


def complete(uid: str, response: Response) -> bytes:
    body: ResponseBody = {"uid": uid, "allowed": response.allowed}
    if response.message is not None:
        body["status"] = {"code": response.code, "message": response.message}
    if response.warnings:
        body["warnings"] = [_short(w) for w in response.warnings]
    review: ReviewBody = {
        "apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": body}
    if not response.patch:
        return orjson.dumps(review)
    # The patch goes in as bytes, after the response's last field: base64 needs no JSON
    # escapes, and as a str orjson would copy it once more and scan every character.
    patch = binascii.b2a_base64(orjson.dumps(response.patch), newline=False)
    return b"".join((orjson.dumps(review)[:-2], _PATCH_FIELDS, patch, b'"}}'))
