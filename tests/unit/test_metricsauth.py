"""Who may read /metrics, decided from what the reviews answer: the token read from the
header, the verdict from a TokenReview and a SubjectAccessReview, what is remembered and
for how long, what a failed or slow review answers, the guard around a handler, and the
default mode. The reviews are fakes that answer as the apiserver does."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from tests.builders import Clock
from webhook.metricsauth.caching import Verdicts, token_key
from webhook.metricsauth.guarding import guarded
from webhook.metricsauth.reviewing import (
    ACCESS_REVIEW_FAILED,
    TOKEN_REVIEW_FAILED,
    Reviewer,
)
from webhook.metricsauth.verdicts import (
    ALLOWED,
    NO_TOKEN,
    NOT_AUTHENTICATED,
    User,
    Verdict,
    access_review,
    access_verdict,
    bearer_token,
    reviewed_user,
)
from webhook.reach import resolve

PROMETHEUS = "system:serviceaccount:monitoring:prometheus-k8s"


# --- the token ------------------------------------------------------------------------

@pytest.mark.parametrize(("header", "token"), [
    ("Bearer abc.def", "abc.def"),
    ("bearer abc", "abc"),
    ("  Bearer   abc  ", "abc"),
    (None, None),
    ("", None),
    ("Bearer", None),
    ("Bearer ", None),
    ("Basic dXNlcjpwYXNz", None),
    ("Bearer two tokens", None),
])
def test_only_a_bearer_token_is_read(header: str | None, token: str | None) -> None:
    assert bearer_token(header) == token


# --- the verdict from the reviews ------------------------------------------------------

def token_answer(authenticated: bool, **user: Any) -> dict[str, Any]:
    return {"status": {"authenticated": authenticated, "user": user}}


def test_an_authenticated_token_names_its_user() -> None:
    answer = token_answer(True, username=PROMETHEUS, uid="u-1",
                          groups=["system:serviceaccounts", "system:authenticated"],
                          extra={"authentication.kubernetes.io/pod-name": ["prom-0"]})
    user = reviewed_user(answer)
    assert user == User(PROMETHEUS, "u-1", ("system:serviceaccounts", "system:authenticated"),
                        (("authentication.kubernetes.io/pod-name", ("prom-0",)),))
    assert access_review(user) == {
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": PROMETHEUS, "uid": "u-1",
                 "groups": ["system:serviceaccounts", "system:authenticated"],
                 "extra": {"authentication.kubernetes.io/pod-name": ["prom-0"]},
                 "nonResourceAttributes": {"path": "/metrics", "verb": "get"}}}


@pytest.mark.parametrize("answer", [
    token_answer(False),
    {"status": {"authenticated": False, "error": "token has expired"}},
    token_answer(True),  # no user name
    {"status": {}},
    {},
])
def test_an_unauthenticated_token_is_a_bare_401(answer: dict[str, Any]) -> None:
    verdict = reviewed_user(answer)
    assert verdict == NOT_AUTHENTICATED
    assert "expired" not in NOT_AUTHENTICATED.reason


@pytest.mark.parametrize(("status", "verdict"), [
    ({"allowed": True}, ALLOWED),
    ({"allowed": True, "denied": True}, Verdict(
        403, f'Forbidden: user "{PROMETHEUS}" may not get /metrics')),
    ({"allowed": False}, Verdict(403, f'Forbidden: user "{PROMETHEUS}" may not get /metrics')),
    ({"allowed": False, "reason": "no RBAC policy matched"}, Verdict(
        403, f'Forbidden: user "{PROMETHEUS}" may not get /metrics: no RBAC policy matched')),
    ({"allowed": False, "evaluationError": "webhook down"}, Verdict(
        403, f'Forbidden: user "{PROMETHEUS}" may not get /metrics: webhook down')),
    ({}, Verdict(403, f'Forbidden: user "{PROMETHEUS}" may not get /metrics')),
])
def test_access_is_allowed_only_when_the_review_says_so(status: dict[str, Any],
                                                        verdict: Verdict) -> None:
    assert access_verdict(User(PROMETHEUS), {"status": status}) == verdict


# --- what is remembered ---------------------------------------------------------------

def test_verdicts_are_kept_a_minute() -> None:
    clock = Clock()
    kept = Verdicts(clock=clock)
    kept.put("t", ALLOWED)
    clock.now = 59.9
    assert kept.get("t") == ALLOWED
    clock.now = 60.0
    assert kept.get("t") is None
    assert len(kept) == 0


def test_the_least_recently_used_verdict_goes_first() -> None:
    kept = Verdicts(size=2, clock=Clock())
    kept.put("a", ALLOWED)
    kept.put("b", NOT_AUTHENTICATED)
    assert kept.get("a") == ALLOWED  # used: "b" is now the oldest
    kept.put("c", ALLOWED)
    assert len(kept) == 2
    assert kept.get("b") is None
    assert kept.get("a") == ALLOWED
    assert kept.get("c") == ALLOWED


def test_the_cache_holds_no_token() -> None:
    kept = Verdicts(clock=Clock())
    kept.put("secret-token", ALLOWED)
    held = repr(vars(kept))
    assert "secret-token" not in held
    assert token_key("secret-token") in held


# --- the reviewer ---------------------------------------------------------------------

class Apiserver:
    """Answers reviews as a cluster would: `tokens` maps a token to its user, `readers`
    are the users allowed to get /metrics. Counts the reviews it was asked."""

    def __init__(self) -> None:
        self.tokens = {"prom": PROMETHEUS, "other": "system:serviceaccount:team-a:default"}
        self.readers = {PROMETHEUS}
        self.asked: list[str] = []
        self.fail: Exception | None = None
        self.fail_access: Exception | None = None
        self.delay = 0.0

    async def token(self, review: dict[str, Any]) -> dict[str, Any]:
        self.asked.append("TokenReview")
        await asyncio.sleep(self.delay)
        if self.fail:
            raise self.fail
        name = self.tokens.get(review["spec"]["token"])
        if name is None:
            return {"status": {"authenticated": False, "error": "invalid bearer token"}}
        return {"status": {"authenticated": True,
                           "user": {"username": name, "groups": ["system:authenticated"]}}}

    async def access(self, review: dict[str, Any]) -> dict[str, Any]:
        self.asked.append("SubjectAccessReview")
        if self.fail_access:
            raise self.fail_access
        spec = review["spec"]
        assert spec["nonResourceAttributes"] == {"path": "/metrics", "verb": "get"}
        return {"status": {"allowed": spec["user"] in self.readers}}


@pytest.fixture
def apiserver() -> Apiserver:
    return Apiserver()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def reviewer(apiserver: Apiserver, clock: Clock) -> Reviewer:
    return Reviewer(apiserver.token, apiserver.access, Verdicts(clock=clock), timeout=0.2)


async def test_a_reader_is_allowed_and_remembered(reviewer: Reviewer, apiserver: Apiserver,
                                                  clock: Clock) -> None:
    assert await reviewer.verdict("Bearer prom") == ALLOWED
    assert apiserver.asked == ["TokenReview", "SubjectAccessReview"]
    for _ in range(3):  # scrapes every 15 s within the minute: no more reviews
        clock.now += 15
        assert await reviewer.verdict("Bearer prom") == ALLOWED
    assert len(apiserver.asked) == 2
    clock.now += 15
    assert await reviewer.verdict("Bearer prom") == ALLOWED
    assert len(apiserver.asked) == 4


async def test_refusals_are_remembered_too(reviewer: Reviewer, apiserver: Apiserver) -> None:
    other = await reviewer.verdict("Bearer other")
    assert other.status == 403
    assert 'user "system:serviceaccount:team-a:default" may not get /metrics' in other.reason
    assert await reviewer.verdict("Bearer made-up") == NOT_AUTHENTICATED
    asked = len(apiserver.asked)
    assert await reviewer.verdict("Bearer other") == other
    assert await reviewer.verdict("Bearer made-up") == NOT_AUTHENTICATED
    assert len(apiserver.asked) == asked == 3  # the made-up token was never authorized


async def test_no_token_asks_nothing(reviewer: Reviewer, apiserver: Apiserver) -> None:
    assert await reviewer.verdict(None) == NO_TOKEN
    assert await reviewer.verdict("Basic dXNlcjpwYXNz") == NO_TOKEN
    assert apiserver.asked == []


@pytest.mark.parametrize("error", [RuntimeError("403 Forbidden"), OSError("refused"),
                                   ValueError("not JSON")])
async def test_a_failed_token_review_is_401_and_asked_again(
        reviewer: Reviewer, apiserver: Apiserver, error: Exception) -> None:
    apiserver.fail = error
    assert await reviewer.verdict("Bearer prom") == TOKEN_REVIEW_FAILED
    apiserver.fail = None
    assert await reviewer.verdict("Bearer prom") == ALLOWED


async def test_a_failed_access_review_is_403_and_asked_again(reviewer: Reviewer,
                                                            apiserver: Apiserver) -> None:
    apiserver.fail_access = RuntimeError("500 Internal Server Error")
    assert await reviewer.verdict("Bearer prom") == ACCESS_REVIEW_FAILED
    apiserver.fail_access = None
    assert await reviewer.verdict("Bearer prom") == ALLOWED


async def test_a_slow_review_times_out_as_401(reviewer: Reviewer,
                                              apiserver: Apiserver) -> None:
    apiserver.delay = 1.0
    assert await reviewer.verdict("Bearer prom") == TOKEN_REVIEW_FAILED
    assert reviewer.verdicts.get("prom") is None


# --- the guard around a handler --------------------------------------------------------

async def metrics(_: web.BaseRequest) -> web.StreamResponse:
    return web.Response(text="airlock_up 1\n")


async def test_the_guard_answers_with_the_verdict(reviewer: Reviewer) -> None:
    handler = guarded(metrics, reviewer)
    cases = {None: (401, NO_TOKEN.reason), "Bearer made-up": (401, NOT_AUTHENTICATED.reason),
             "Bearer prom": (200, "airlock_up 1")}
    for header, (status, text) in cases.items():
        headers = {"Authorization": header} if header else {}
        response = await handler(make_mocked_request("GET", "/metrics", headers=headers))
        assert isinstance(response, web.Response)
        assert (response.status, response.text) == (status, text + "\n")
        assert ("WWW-Authenticate" in response.headers) == (status == 401)


def forbidden(verdict: Verdict) -> web.StreamResponse:
    return web.Response(status=403, text=f"page: {verdict.reason}")


async def test_a_browser_may_send_its_token_in_a_cookie(reviewer: Reviewer) -> None:
    """The dashboard's guard: the token from the header, else from the cookie; every
    refusal answered as the caller says (the dashboard: a 403 page)."""
    handler = guarded(metrics, reviewer, forbidden, cookie="airlock-dashboard-token")
    cases = [({}, 403, "page: Unauthorized: /metrics needs a bearer token"),
             ({"Cookie": "airlock-dashboard-token=prom"}, 200, "airlock_up 1\n"),
             ({"Cookie": "airlock-dashboard-token=made-up"}, 403,
              f"page: {NOT_AUTHENTICATED.reason}"),
             ({"Cookie": "other-cookie=prom"}, 403,
              "page: Unauthorized: /metrics needs a bearer token"),
             # The header wins over the cookie.
             ({"Cookie": "airlock-dashboard-token=prom", "Authorization": "Bearer other"},
              403, 'page: Forbidden: user "system:serviceaccount:team-a:default" may not '
                   "get /metrics")]
    for headers, status, text in cases:
        response = await handler(make_mocked_request("GET", "/dashboard", headers=headers))
        assert isinstance(response, web.Response)
        assert (response.status, response.text) == (status, text), headers


async def test_without_a_reviewer_the_handler_is_left_alone() -> None:
    assert guarded(metrics, None) is metrics


# --- the default mode -----------------------------------------------------------------

@pytest.mark.parametrize(("given", "kubeconfig", "in_pod", "mode"), [
    (None, None, False, "none"),  # a laptop
    (None, None, True, "kubernetes"),  # a pod
    (None, Path("kubeconfig"), False, "kubernetes"),
    ("none", None, True, "none"),
    ("kubernetes", None, False, "kubernetes"),
])
def test_metrics_auth_is_on_wherever_there_is_an_apiserver(
        monkeypatch: pytest.MonkeyPatch, given: Any, kubeconfig: Path | None, in_pod: bool,
        mode: str) -> None:
    if in_pod:
        monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    else:
        monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert resolve(given, kubeconfig) == mode
