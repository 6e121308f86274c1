"""The dashboard's serving side, without a cluster: what a refused caller gets (a 403 and
the reason, escaped, never data), and the state computed at most every few seconds
whoever polls."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from tests.builders import Clock
from webhook.controller.shells.dashboarding import (
    ASSETS,
    FRESH_FOR,
    HEADERS,
    REST_PER_COMPUTE,
    Recent,
    add_dashboard,
    asset,
    denied_json,
    denied_page,
)
from webhook.metricsauth.verdicts import Verdict

REFUSED = Verdict(403, 'Forbidden: user "<b>mallory</b>" may not get /dashboard')


@pytest.mark.parametrize("refuse", [denied_page, denied_json])
def test_a_refusal_is_a_403_with_the_reason_and_no_data(refuse: Any) -> None:
    response = refuse(Verdict(401, "Unauthorized: /dashboard needs a bearer token"))
    assert isinstance(response, web.Response)
    assert response.status == 403
    assert "/dashboard needs a bearer token" in (response.text or "")
    assert response.headers["Content-Security-Policy"] == HEADERS["Content-Security-Policy"]


def test_the_page_escapes_the_reason() -> None:
    text = denied_page(REFUSED).text or ""
    assert "&lt;b&gt;mallory&lt;/b&gt;" in text
    assert "<b>" not in text
    assert json.loads(denied_json(REFUSED).text or "") == {"status": 403,
                                                           "reason": REFUSED.reason}


async def test_the_state_is_computed_at_most_every_few_seconds() -> None:
    clock, computed = Clock(100.0), []

    def take() -> Callable[[], dict[str, Any]]:
        computed.append(clock.now)
        return functools.partial(dict, n=len(computed))

    recent = Recent(take, clock)
    assert json.loads(await recent.body()) == {"n": 1}
    clock.now += FRESH_FOR / 2
    assert json.loads(await recent.body()) == {"n": 1}
    clock.now += FRESH_FOR
    assert json.loads(await recent.body()) == {"n": 2}
    assert computed == [100.0, 100.0 + 1.5 * FRESH_FOR]


async def test_a_state_slow_to_compute_is_served_longer() -> None:
    """REST_PER_COMPUTE times as long as it took: a tenth of the controller at most."""
    clock = Clock(0.0)

    def take() -> Callable[[], dict[str, Any]]:
        def compute() -> dict[str, Any]:
            clock.now += 1.0  # a large cluster: a second to compute
            return {"at": clock.now}
        return compute

    recent = Recent(take, clock)
    assert json.loads(await recent.body()) == {"at": 1.0}
    clock.now += REST_PER_COMPUTE - 1.0
    assert json.loads(await recent.body()) == {"at": 1.0}
    clock.now += 1.0
    assert json.loads(await recent.body()) == {"at": REST_PER_COMPUTE + 2.0}


@pytest.mark.parametrize("name", ["index.html", "denied.html", *ASSETS])
def test_the_page_ships_in_the_package(name: str) -> None:
    text = asset(name)
    assert text.strip()
    if name.endswith(".html"):
        # Nothing inline and nothing from elsewhere: the CSP allows only the origin.
        assert "<script>" not in text
        assert "style=" not in text
        assert "http" not in text.replace("http-equiv", "")


async def test_a_state_that_fails_is_a_503_the_page_shows() -> None:
    def take() -> Callable[[], dict[str, Any]]:
        def compute() -> dict[str, Any]:
            raise KeyError("ml/train-0")
        return compute

    served = web.Application()
    add_dashboard(served, take, None)
    request = make_mocked_request("GET", "/dashboard/state", app=served)
    handler = (await served.router.resolve(request)).handler
    response = await handler(request)
    assert isinstance(response, web.Response)
    assert (response.status, json.loads(response.text or "")) == (
        503, {"status": 503, "reason": "KeyError: 'ml/train-0'"})
