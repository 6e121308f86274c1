"""Property-based fuzzing of the endpoints over real TLS: whatever arrives, the answer is
an HTTP 400 with a message or a well-formed AdmissionReview, never a 500 or a hang; and
every patch applies cleanly to the pod it was computed for, and is idempotent.

A short run, for CI; `python -m bench.fuzz` draws 100,000 reviews from the same
strategies (`tests/strategies.py`)."""

from __future__ import annotations

import asyncio
import http.client
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import review
from tests.servers import MountedServer
from tests.strategies import (
    GeneratedPolicy,
    answer_problem,
    damaged_pods,
    hostile_pods,
    malformed_bodies,
    odd_reviews,
    patched,
    policies,
    reviews,
)
from webhook.policy.loading import load_policy


class ThreadedServer:
    """The server on an event loop of its own, for hypothesis's synchronous tests."""

    def __init__(self, tmp: Path) -> None:
        self.mounted = MountedServer.make(tmp)
        self.loop = asyncio.new_event_loop()
        self.port = 0
        ready = threading.Event()

        async def start() -> None:
            self.listening = await self.mounted.listen()
            self.port = self.listening.port
            ready.set()

        self.thread = threading.Thread(
            target=lambda: (self.loop.run_until_complete(start()), self.loop.run_forever()),
            daemon=True)
        self.thread.start()
        assert ready.wait(10)
        self.context = self.mounted.client_context()

    def post(self, path: str, body: bytes) -> tuple[int, bytes]:
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self.context,
                                           timeout=10)
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()
        finally:
            conn.close()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.listening.close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreadedServer]:
    s = ThreadedServer(tmp_path_factory.mktemp("fuzz"))
    yield s
    s.stop()


def check(status: int, body: bytes, uid: str | None) -> dict[str, Any] | None:
    """The answer's response (None for a 400), once `answer_problem` finds nothing."""
    assert answer_problem(status, body, uid) is None, (status, body[:300])
    if status == 400:
        return None
    resp: dict[str, Any] = orjson.loads(body)["response"]
    return resp


FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(body=malformed_bodies)
def test_malformed_bodies(server: ThreadedServer, body: bytes) -> None:
    for path in ("/mutate", "/validate"):
        check(*server.post(path, body), None)


@FUZZ
@given(body=odd_reviews())
def test_odd_reviews(server: ThreadedServer, body: dict[str, Any]) -> None:
    for path in ("/mutate", "/validate"):
        check(*server.post(path, orjson.dumps(body)), None)


@FUZZ
@given(obj=damaged_pods(), operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
def test_damaged_pods(server: ThreadedServer, obj: dict[str, Any], operation: str) -> None:
    body = orjson.dumps(review(obj, operation=operation, old=obj, namespace="ml"))
    check(*server.post("/validate", body), "uid-1")
    status, answer = server.post("/mutate", body)
    check(status, answer, "uid-1")
    if status == 400 or (again := patched(obj, answer)) is None:
        return
    resp = check(*server.post("/mutate", orjson.dumps(review(again, namespace="ml"))), "uid-1")
    assert resp is not None
    assert "patch" not in resp, "mutation is not idempotent"


@FUZZ
@given(body=reviews() | reviews(hostile_pods()))
def test_reviews_of_workload_pods(server: ThreadedServer, body: dict[str, Any]) -> None:
    """Pods as workloads' controllers write them, or as an attacker does (hostile values
    in every key Airlock reads), in any operation, by any user: every patch applies, and
    the patched pod, sent again as the apiserver reinvokes the webhook, is not patched
    again."""
    request = body["request"]
    check(*server.post("/validate", orjson.dumps(body)), request["uid"])
    status, answer = server.post("/mutate", orjson.dumps(body))
    check(status, answer, request["uid"])
    if status != 200 or (again := patched(request["object"], answer)) is None:
        return
    resent = {**body, "request": {**request, "object": again}}
    resp = check(*server.post("/mutate", orjson.dumps(resent)), request["uid"])
    assert resp is not None
    assert "patch" not in resp, "mutation is not idempotent"


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(policy=policies())
def test_generated_policies_load(tmp_path_factory: pytest.TempPathFactory,
                                 policy: GeneratedPolicy) -> None:
    """The bench serves generated policies: each must be one the webhook loads."""
    load_policy(policy.write(tmp_path_factory.mktemp("policy")))
