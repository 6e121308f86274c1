"""Property-based fuzzing of the endpoints over real TLS: whatever arrives, the answer is
an HTTP 400 with a message or a well-formed AdmissionReview, never a 500 or a hang; and
every patch applies cleanly to the pod it was computed for, and is idempotent."""

from __future__ import annotations

import asyncio
import base64
import http.client
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import pod, review
from tests.servers import MountedServer


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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=12)

POD_FIELDS = [
    ("metadata", "labels"), ("metadata", "annotations"), ("metadata", "ownerReferences"),
    ("metadata", "namespace"), ("metadata", "name"), ("spec", "containers"),
    ("spec", "initContainers"), ("spec", "schedulingGates"), ("spec", "tolerations"),
    ("spec", "affinity"), ("spec", "nodeSelector"), ("spec", "priority"),
    ("spec", "priorityClassName"), ("spec", "schedulerName"), ("spec", "preemptionPolicy"),
    ("spec", "topologySpreadConstraints"),
]

BASE_PODS = [
    pod().gpus(8).label("training.kubeflow.org/job-name", "llama").build(),
    pod().gpus(1).owner("ReplicaSet", "web-1", "apps/v1").build(),
    pod().gpus(2).label("gpu-airlock.io/gang-name", "g").annotation("gpu-airlock.io/gang-size",
                                                                    "2").build(),
    pod().cpu().build(),
]


@st.composite
def damaged_pods(draw: st.DrawFn) -> dict[str, Any]:
    obj: dict[str, Any] = orjson.loads(orjson.dumps(draw(st.sampled_from(BASE_PODS))))
    for section, key in draw(st.lists(st.sampled_from(POD_FIELDS), max_size=3)):
        obj.setdefault(section, {})[key] = draw(json_values)
    return obj


def check(status: int, body: bytes, uid: str | None) -> dict[str, Any] | None:
    assert status in (200, 400), (status, body[:300])
    if status == 400:
        assert body.strip(), "a 400 must say why"
        return None
    resp: dict[str, Any] = orjson.loads(body)["response"]
    assert isinstance(resp["allowed"], bool)
    if uid is not None:
        assert resp["uid"] == uid
    if not resp["allowed"]:
        assert resp["status"]["message"]
    return resp


FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(body=st.binary(max_size=512))
def test_random_bytes(server: ThreadedServer, body: bytes) -> None:
    for path in ("/mutate", "/validate"):
        check(*server.post(path, body), None)


@FUZZ
@given(value=json_values)
def test_random_json_in_the_review(server: ThreadedServer, value: Any) -> None:
    body = review(pod().gpus(1).build())
    body["request"]["object"] = value
    check(*server.post("/mutate", orjson.dumps(body)), "uid-1")
    body["request"] = value
    check(*server.post("/validate", orjson.dumps(body)), None)


@FUZZ
@given(obj=damaged_pods(), operation=st.sampled_from(["CREATE", "UPDATE", "DELETE"]))
def test_damaged_pods(server: ThreadedServer, obj: dict[str, Any], operation: str) -> None:
    body = orjson.dumps(review(obj, operation=operation, old=obj, namespace="ml"))
    check(*server.post("/validate", body), "uid-1")
    resp = check(*server.post("/mutate", body), "uid-1")
    if resp is None or "patch" not in resp:
        return
    patched = jsonpatch.apply_patch(obj, orjson.loads(base64.b64decode(resp["patch"])))
    again = check(*server.post("/mutate", orjson.dumps(review(patched, namespace="ml"))), "uid-1")
    assert again is not None
    assert "patch" not in again, "mutation is not idempotent"
