"""Asking a restarting apiserver again: its passing answers (503, 429, 403, no
connection) are asked again, the answers named are raised at once, and a deadline ends
the asking."""

from __future__ import annotations

import aiohttp
import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.shells import patience
from webhook.controller.shells.patience import patiently


class Answers:
    """Raises what it is given, in turn, then answers "ok"."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


@pytest.fixture(autouse=True)
def no_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patience, "FIRST_PAUSE", 0.0)


async def test_passing_answers_are_asked_again() -> None:
    call = Answers(ApiException(status=503), ApiException(status=403),
                   ApiException(status=429), aiohttp.ClientConnectionError("refused"),
                   ConnectionRefusedError())
    assert await patiently(call, "secret") == "ok"
    assert call.calls == 6


async def test_an_answer_is_raised_at_once() -> None:
    call = Answers(ApiException(status=404))
    with pytest.raises(ApiException) as raised:
        await patiently(call, "secret")
    assert (raised.value.status, call.calls) == (404, 1)
    call = Answers(ApiException(status=409))
    with pytest.raises(ApiException):
        await patiently(call, "secret", answers=frozenset({409}))


async def test_the_deadline_ends_the_asking() -> None:
    call = Answers(*[ApiException(status=503)] * 100)
    with pytest.raises(ApiException) as raised:
        await patiently(call, "secret", within=0.0)
    assert raised.value.status == 503
    assert call.calls <= 2
