"""Every admission response comes from these constructors, and `complete` is the one
place a response becomes wire format (uid copied, patch encoded, warnings trimmed)."""

from __future__ import annotations

import base64

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


def allowed(warnings: tuple[str, ...] = (), outcome: Outcome | None = None) -> Response:
    return Response(allowed=True, warnings=warnings, outcome=outcome)


def patched(patch: list[PatchOp], warnings: tuple[str, ...], outcome: Outcome) -> Response:
    return Response(allowed=True, patch=tuple(patch), warnings=warnings, outcome=outcome)


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
    if response.patch:
        body["patchType"] = "JSONPatch"
        body["patch"] = base64.b64encode(orjson.dumps(response.patch)).decode()
    if response.warnings:
        body["warnings"] = [_short(w) for w in response.warnings]
    review: ReviewBody = {
        "apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": body}
    return orjson.dumps(review)
