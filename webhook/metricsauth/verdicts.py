"""What a scrape of `/metrics` is answered, from what the reviews said. Pure: the
reviews come in as the apiserver's JSON, the verdict goes out as an HTTP status and a
short reason.

A 401 never says why a token was refused (expired, unknown signer...): the caller has not
shown who it is, and the apiserver itself answers such callers a bare "Unauthorized". A
403 names the authenticated user, as the apiserver does."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

PATH = "/metrics"
VERB = "get"


@dataclass(frozen=True, slots=True)
class Verdict:
    status: int  # 200, 401 or 403
    reason: str = ""

    @property
    def allowed(self) -> bool:
        return self.status == 200


ALLOWED = Verdict(200)


def no_token(path: str = PATH) -> Verdict:
    return Verdict(401, f"Unauthorized: {path} needs a bearer token")


NO_TOKEN = no_token()
NOT_AUTHENTICATED = Verdict(401, "Unauthorized: the token was not authenticated")


@dataclass(frozen=True, slots=True)
class User:
    """Who the apiserver says a token belongs to."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()


def bearer_token(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header; None for anything else."""
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token or " " in token:
        return None
    return token


def token_review(token: str) -> dict[str, Any]:
    """The TokenReview that asks who `token` belongs to. No audiences: the apiserver's
    own, the audience of the service-account tokens Prometheus mounts."""
    return {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}}


def reviewed_user(review: Mapping[str, Any]) -> User | Verdict:
    """The user a TokenReview authenticated, or the 401 when it did not."""
    status = review.get("status") or {}
    user = status.get("user") or {}
    if status.get("authenticated") is not True or not user.get("username"):
        return NOT_AUTHENTICATED
    extra = user.get("extra") or {}
    return User(name=user["username"], uid=user.get("uid") or "",
                groups=tuple(user.get("groups") or ()),
                extra=tuple(sorted((k, tuple(v or ())) for k, v in extra.items())))


def access_review(user: User, path: str = PATH, verb: str = VERB) -> dict[str, Any]:
    """The SubjectAccessReview that asks whether `user` may `verb` the URL `path`."""
    spec: dict[str, Any] = {"user": user.name, "groups": list(user.groups),
                            "nonResourceAttributes": {"path": path, "verb": verb}}
    if user.uid:
        spec["uid"] = user.uid
    if user.extra:
        spec["extra"] = {k: list(v) for k, v in user.extra}
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}


def access_verdict(user: User, review: Mapping[str, Any], path: str = PATH,
                   verb: str = VERB) -> Verdict:
    """200 when the SubjectAccessReview allowed `user`, else the 403 that names them."""
    status = review.get("status") or {}
    if status.get("allowed") is True and status.get("denied") is not True:
        return ALLOWED
    reason = status.get("reason") or status.get("evaluationError") or ""
    return Verdict(403, f'Forbidden: user "{user.name}" may not {verb} {path}'
                        + (f": {reason}" if reason else ""))
