"""The reviews themselves: a TokenReview, then a SubjectAccessReview, each bounded in
time, their verdict remembered (caching.py). A review that fails or times out answers
401 or 403 with a short reason; a scrape never gets a 500 from here."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client

from webhook.metricsauth.caching import Verdicts
from webhook.metricsauth.verdicts import (
    PATH,
    Verdict,
    access_review,
    access_verdict,
    bearer_token,
    no_token,
    reviewed_user,
    token_review,
)

log = logging.getLogger("airlock.metricsauth")

# Each review; both together stay within Prometheus' default scrape timeout (10 s).
REVIEW_TIMEOUT = 3.0
# Reviews in flight at once. Anyone who reaches the port can make up tokens, and each
# costs the apiserver a review: this bounds what they cost it. Waiting for a turn counts
# against the review's timeout.
IN_FLIGHT = 4

TOKEN_REVIEW_FAILED = Verdict(401, "Unauthorized: the token review failed")
ACCESS_REVIEW_FAILED = Verdict(403, "Forbidden: the access review failed")

# Creates a review (its JSON) and returns it as the apiserver answered it.
Ask = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class Reviewer:
    """Verdicts for `Authorization` headers, from what `ask_token` and `ask_access`
    answer (`reviewer_for` asks an apiserver)."""

    def __init__(self, ask_token: Ask, ask_access: Ask, verdicts: Verdicts | None = None,
                 timeout: float = REVIEW_TIMEOUT, path: str = PATH,
                 close: Callable[[], Awaitable[None]] | None = None) -> None:
        self.ask_token, self.ask_access = ask_token, ask_access
        self.verdicts = verdicts if verdicts is not None else Verdicts()
        self.timeout = timeout
        self.path = path
        self._close = close
        self._turns = asyncio.Semaphore(IN_FLIGHT)

    async def verdict(self, authorization: str | None) -> Verdict:
        token = bearer_token(authorization)
        if token is None:
            return no_token(self.path)
        known = self.verdicts.get(token)
        if known is not None:
            return known
        reviewed = await self._ask("token review", TOKEN_REVIEW_FAILED, self.ask_token,
                                   token_review(token))
        if isinstance(reviewed, Verdict):
            return reviewed
        user = reviewed_user(reviewed)
        if isinstance(user, Verdict):
            self.verdicts.put(token, user)
            return user
        access = await self._ask("access review", ACCESS_REVIEW_FAILED, self.ask_access,
                                 access_review(user, self.path))
        if isinstance(access, Verdict):
            return access
        verdict = access_verdict(user, access, self.path)
        self.verdicts.put(token, verdict)
        return verdict

    async def _ask(self, what: str, failed: Verdict, ask: Ask,
                   review: dict[str, Any]) -> dict[str, Any] | Verdict:
        """The review as answered, or `failed` (not remembered: asked again next time)
        when the apiserver refused, failed or was too slow."""
        try:
            async with asyncio.timeout(self.timeout), self._turns:
                return await ask(review)
        except Exception as e:  # whatever went wrong, the scraper gets 401/403, not 500
            log.warning("metrics scrape not reviewed", extra={
                "review": what, "error": f"{type(e).__name__}: {e}"[:300]})
            return failed

    async def close(self) -> None:
        if self._close is not None:
            await self._close()


def reviewer_for(api: client.ApiClient, own: bool = False, path: str = PATH) -> Reviewer:
    """A reviewer asking the apiserver of `api`, whose credentials may create
    tokenreviews and subjectaccessreviews, whether a caller may get `path`; with `own`,
    closing it closes `api`."""
    authn, authz = client.AuthenticationV1Api(api), client.AuthorizationV1Api(api)

    async def ask_token(review: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = api.sanitize_for_serialization(
            await authn.create_token_review(body=review))
        return answer

    async def ask_access(review: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = api.sanitize_for_serialization(
            await authz.create_subject_access_review(body=review))
        return answer

    return Reviewer(ask_token, ask_access, path=path, close=api.close if own else None)
