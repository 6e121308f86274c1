"""AdmissionReview bytes to a Request. A body that is not a well-formed review raises
BadReview, which the server answers with HTTP 400 and the message."""

from __future__ import annotations

from typing import Any, get_args

import orjson

from webhook.admission.reviews import REVIEW_API_VERSION, Operation, Request
from webhook.values import described, shown

MAX_BODY = 3 * 1024 * 1024
# Each operation by its name: looking one up gives it its type, without a call to cast.
_OPERATIONS: dict[str, Operation] = {op: op for op in get_args(Operation)}


class BadReview(ValueError):
    """The body is not an AdmissionReview this webhook can answer."""


def _field(obj: dict[str, Any], key: str, kind: type, where: str) -> Any:
    value = obj.get(key)
    if not isinstance(value, kind):
        raise BadReview(f"{where}.{key} must be a {kind.__name__}, got "
                        f"{type(value).__name__ if value is not None else 'nothing'}")
    return value


def decode(body: bytes) -> Request:
    if len(body) > MAX_BODY:
        raise BadReview(f"body is {len(body)} bytes; the limit is {MAX_BODY} (3 MiB)")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as e:
        raise BadReview(f"body is not valid JSON: {e}") from None
    if not isinstance(review, dict):
        raise BadReview("body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != REVIEW_API_VERSION:
        raise BadReview(f"apiVersion must be {REVIEW_API_VERSION}, got "
                        f"{described(review.get('apiVersion'))}")
    if review.get("kind") != "AdmissionReview":
        raise BadReview(f"kind must be AdmissionReview, got {described(review.get('kind'))}")
    # The common case in one test per field, without a call each; _field names what
    # is wrong.
    request = review.get("request")
    if type(request) is not dict:
        request = _field(review, "request", dict, "AdmissionReview")
    uid, operation = request.get("uid"), request.get("operation")
    if type(uid) is not str or not uid or type(operation) is not str \
            or operation not in _OPERATIONS:
        uid = _field(request, "uid", str, "request")
        if not uid:
            raise BadReview("request.uid must not be empty")
        operation = _field(request, "operation", str, "request")
        raise BadReview(f"request.operation {shown(operation)} is not one of "
                        f"{sorted(_OPERATIONS)}")
    user = request.get("userInfo") or {}
    if not isinstance(user, dict) or not isinstance(user.get("username", ""), str):
        raise BadReview("request.userInfo.username must be a string")
    groups = user.get("groups") or []
    if type(groups) is not list or not all(type(g) is str for g in groups):
        raise BadReview("request.userInfo.groups must be a list of strings")
    namespace = request.get("namespace") or ""
    if not isinstance(namespace, str):
        raise BadReview("request.namespace must be a string")
    # Positional, like every NamedTuple built per request: keywords cost more.
    return Request(uid, _OPERATIONS[operation], namespace, user.get("username", ""),
                   request.get("object"), request.get("oldObject"), tuple(groups))
