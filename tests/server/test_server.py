"""The webhook over real TLS: endpoints, bad input, reloads of certificate and policy."""

from __future__ import annotations

import asyncio
import base64
import datetime
import re
import ssl
import time
from pathlib import Path

import aiohttp
import orjson
import pytest

from tests.builders import pod, review
from tests.servers import MountedServer, cert_files, policy_files
from webhook.certificates import make_certs


async def post(session: aiohttp.ClientSession, url: str, body: bytes) -> tuple[int, bytes]:
    async with session.post(url, data=body,
                            headers={"Content-Type": "application/json"}) as r:
        return r.status, await r.read()


async def test_mutate_returns_a_patch_over_tls(running: MountedServer,
                                               session: aiohttp.ClientSession) -> None:
    obj = pod().gpus(8).label("training.kubeflow.org/job-name", "llama").build()
    status, body = await post(session, running.url + "/mutate", orjson.dumps(review(obj)))
    assert status == 200
    resp = orjson.loads(body)["response"]
    ops = orjson.loads(base64.b64decode(resp["patch"]))
    assert any(op["path"] == "/spec/priorityClassName" for op in ops)


@pytest.mark.parametrize("endpoint", ["/mutate", "/validate"])
@pytest.mark.parametrize(("body", "message"), [
    (b"", "not valid JSON"),
    (b"\xff\xfe", "not valid JSON"),
    (b'{"apiVersion": "v1", "kind": "Pod"}', "apiVersion"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}', "request"),
    (b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {}}', "uid"),
])
async def test_malformed_reviews_get_400_with_a_message(
        running: MountedServer, session: aiohttp.ClientSession, endpoint: str, body: bytes,
        message: str) -> None:
    status, text = await post(session, running.url + endpoint, body)
    assert status == 400
    assert message in text.decode()


async def test_a_body_that_does_not_arrive_is_answered_within_the_budget(
        running: MountedServer) -> None:
    # A client that sends the headers and part of the body, then nothing: the review is
    # answered, not left waiting on the event loop.
    running.server.budget = 0.2
    port = int(running.url.rsplit(":", 1)[1])
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=running.client_context(), server_hostname="localhost")
    writer.write(b"POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: "
                 b"application/json\r\nContent-Length: 1000\r\n\r\n{\"apiVersion\"")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(4096), 10)
    writer.close()
    assert answer.startswith(b"HTTP/1.1 408"), answer
    assert b"did not arrive within 0.2 s" in answer


async def test_the_event_loop_lag_is_measured(running: MountedServer,
                                              session: aiohttp.ClientSession) -> None:
    def lagging() -> dict[str, float]:
        return {le: float(n) for le, n in re.findall(
            r'^airlock_event_loop_lag_seconds_bucket\{le="([^"]+)"\} (\S+)$', text,
            re.MULTILINE)}

    async with session.get(running.url + "/metrics") as r:
        text = await r.text()
    before = lagging()
    # Whatever holds the loop (here, a blocking call) delays every review behind it.
    time.sleep(0.6)
    await asyncio.sleep(0.6)
    async with session.get(running.url + "/metrics") as r:
        text = await r.text()
    after = lagging()
    late = (after["+Inf"] - after["0.25"]) - (before["+Inf"] - before["0.25"])
    assert late >= 1


async def test_body_over_3_mib_gets_400(running: MountedServer,
                                        session: aiohttp.ClientSession) -> None:
    obj = pod().annotation("blob", "x" * (3 * 1024 * 1024)).build()
    status, text = await post(session, running.url + "/mutate", orjson.dumps(review(obj)))
    assert status == 400
    assert b"3 MiB" in text


async def test_unknown_paths_and_wrong_methods_are_named(
        running: MountedServer, session: aiohttp.ClientSession) -> None:
    status, text = await post(session, running.url + "/mutating", b"{}")
    assert status == 404
    assert "/mutate" in text.decode()
    async with session.get(running.url + "/mutate") as r:
        assert r.status == 405
        assert r.headers["Allow"] == "POST"
    async with session.post(running.url + "/healthz") as r:
        assert r.status == 405
        assert r.headers["Allow"] == "GET,HEAD"
    async with session.head(running.url + "/readyz") as r:
        assert r.status == 200


async def test_not_a_pod_is_a_well_formed_denial(running: MountedServer,
                                                 session: aiohttp.ClientSession) -> None:
    body = orjson.dumps(review({"kind": "Deployment", "metadata": {"name": "d"}}))
    status, text = await post(session, running.url + "/mutate", body)
    resp = orjson.loads(text)["response"]
    assert status == 200
    assert resp["allowed"] is False
    assert "only Pods" in resp["status"]["message"]


async def test_health_ready_and_metrics(running: MountedServer,
                                        session: aiohttp.ClientSession) -> None:
    await post(session, running.url + "/mutate", orjson.dumps(review(pod().gpus(1).build())))
    async with session.get(running.url + "/healthz") as r:
        assert r.status == 200
    async with session.get(running.url + "/readyz") as r:
        assert r.status == 200
        assert (await r.json())["ready"] is True
    async with session.get(running.url + "/metrics") as r:
        text = await r.text()
    for name in ("airlock_admission_requests_total", "airlock_admission_duration_seconds_bucket",
                 "airlock_decisions_total", "airlock_policy_reloads_total",
                 "airlock_certificate_expiry_seconds", "airlock_policy_loaded 1.0"):
        assert name in text
    assert 'airlock_admission_requests_total{endpoint="mutate",result="allowed"} 1.0' in text


def decisions(metrics: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2)) for m in re.finditer(
        r'^airlock_decisions_total\{class="([^"]+)"\} (\S+)$', metrics, re.MULTILINE)}


async def test_a_pod_counts_one_decision_when_created_and_none_when_updated(
        running: MountedServer, session: aiohttp.ClientSession) -> None:
    obj = pod().gpus(8).label("training.kubeflow.org/job-name", "llama").build()
    cpu = pod().cpu().build()
    for endpoint in ("/mutate", "/validate"):
        for body in (review(obj), review(cpu),
                     review(obj, operation="UPDATE", old=obj),
                     review(obj, operation="DELETE", old=obj)):
            status, _ = await post(session, running.url + endpoint, orjson.dumps(body))
            assert status == 200
    async with session.get(running.url + "/metrics") as r:
        counted = decisions(await r.text())
    assert {c: n for c, n in counted.items() if n} == {"training": 1.0, "out-of-scope": 1.0}
    # Every outcome is a series from the start, so rates over them are never empty.
    assert {"unclassified", "bad-object", "error", "no-policy"} <= counted.keys()


async def test_a_badly_typed_pod_counts_once_as_bad_object(
        running: MountedServer, session: aiohttp.ClientSession) -> None:
    body = orjson.dumps(review({"kind": "Pod", "spec": {"priority": "high"}}))
    for endpoint in ("/mutate", "/validate"):
        status, _ = await post(session, running.url + endpoint, body)
        assert status == 200
    async with session.get(running.url + "/metrics") as r:
        counted = decisions(await r.text())
    assert {c: n for c, n in counted.items() if n} == {"bad-object": 1.0}


async def wait_for(predicate: object, within: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while not predicate():  # type: ignore[operator]
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.05)


async def test_broken_policy_keeps_the_last_good_one(running: MountedServer,
                                                     session: aiohttp.ClientSession) -> None:
    good = running.server.policies.policy
    files = policy_files()
    files["99-broken.yaml"] = b"apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\n" \
        b"metadata: {name: broken}\nspec:\n  rules: [{name: x, class: royalty}]\n"
    running.policies.publish(files)
    await wait_for(lambda: running.server.policies.last_error is not None)
    assert running.server.policies.policy is good
    async with session.get(running.url + "/readyz") as r:
        body = await r.json()
        assert r.status == 200
        assert "99-broken.yaml" in body["policyError"]
    async with session.get(running.url + "/metrics") as r:
        assert 'airlock_policy_reloads_total{result="failed"} 1.0' in await r.text()
    # The request path still works with the last good policy.
    obj = pod().gpus(8).label("training.kubeflow.org/job-name", "llama").build()
    status, body_bytes = await post(session, running.url + "/mutate", orjson.dumps(review(obj)))
    assert status == 200
    assert "patch" in orjson.loads(body_bytes)["response"]
    running.policies.publish(policy_files())
    await wait_for(lambda: running.server.policies.last_error is None)


async def _serial(url: str, ca: Path) -> int:
    host, port = url.removeprefix("https://").split(":")
    _, writer = await asyncio.open_connection(
        host, int(port), ssl=ssl.create_default_context(cafile=str(ca)))
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    from cryptography import x509
    return x509.load_der_x509_certificate(der).serial_number


async def test_certificate_rotation_drops_no_request(running: MountedServer,
                                                     tmp_path: Path) -> None:
    before = await _serial(running.url, running.ca)
    new = cert_files(tmp_path / "rotated")
    (tmp_path / "rotated-ca.crt").write_bytes(new["ca.crt"])
    # Trust both CAs, as the apiserver's caBundle does during a cert-manager rotation.
    bundle = tmp_path / "bundle.crt"
    bundle.write_bytes(running.ca.read_bytes() + new["ca.crt"])
    body = orjson.dumps(review(pod().gpus(1).owner("Job", "j").build()))
    statuses: list[int] = []

    async def hammer(stop: asyncio.Event) -> None:
        while not stop.is_set():
            # A fresh connection each time, so requests straddle the swap.
            connector = aiohttp.TCPConnector(ssl=ssl.create_default_context(cafile=str(bundle)),
                                             force_close=True)
            async with aiohttp.ClientSession(connector=connector) as s:
                statuses.append((await post(s, running.url + "/mutate", body))[0])

    stop = asyncio.Event()
    tasks = [asyncio.create_task(hammer(stop)) for _ in range(4)]
    await asyncio.sleep(0.3)
    running.certs.publish(new)
    await wait_for(lambda: running.server.certs.reloads >= 2)
    await asyncio.sleep(0.3)
    stop.set()
    await asyncio.gather(*tasks)
    assert statuses
    assert set(statuses) == {200}
    after = await _serial(running.url, tmp_path / "rotated-ca.crt")
    assert after != before


async def test_expired_certificate_is_reported_not_ready(running: MountedServer,
                                                         tmp_path: Path) -> None:
    long_ago = datetime.datetime.now(datetime.UTC) - datetime.timedelta(days=30)
    files = make_certs(tmp_path / "expired", days=1, not_before=long_ago)
    running.certs.publish({"tls.crt": files.cert.read_bytes(), "tls.key": files.key.read_bytes()})
    await wait_for(lambda: running.server.certs.problem() is not None)
    assert "expired" in (running.server.certs.problem() or "")
    connector = aiohttp.TCPConnector(ssl=False)
    async with aiohttp.ClientSession(connector=connector) as s, \
            s.get(running.url + "/readyz") as r:
        assert r.status == 503
        assert "expired" in " ".join((await r.json())["problems"])


async def test_mismatched_key_keeps_the_old_certificate(running: MountedServer,
                                                        tmp_path: Path) -> None:
    a, b = cert_files(tmp_path / "a"), cert_files(tmp_path / "b")
    running.certs.publish({"tls.crt": a["tls.crt"], "tls.key": b["tls.key"]})
    await wait_for(lambda: running.server.certs.error is not None)
    assert "cannot load" in (running.server.certs.error or "")
    # Still serving with the original pair.
    await _serial(running.url, running.ca)
