"""The engine and the wire format, without HTTP: decode, handle, complete."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from tests.builders import pod, review
from webhook.admission import engine
from webhook.admission.decoding import BadReview, decode
from webhook.admission.responses import complete
from webhook.policy.model import Policy


def answer(body: dict[str, Any], policy: Policy | None,
           handler: engine.Handler = engine.MUTATE) -> dict[str, Any]:
    request = decode(orjson.dumps(body))
    out: dict[str, Any] = orjson.loads(complete(request.uid,
                                                engine.handle(handler, request, policy)))
    return out


def test_patch_is_base64_json_patch_and_uid_is_echoed(policy: Policy) -> None:
    obj = pod().gpus(8).label("training.kubeflow.org/job-name", "j").build()
    out = answer(review(obj, uid="abc-123"), policy)
    resp = out["response"]
    assert out["apiVersion"] == "admission.k8s.io/v1"
    assert out["kind"] == "AdmissionReview"
    assert resp["uid"] == "abc-123"
    assert resp["allowed"] is True
    assert resp["patchType"] == "JSONPatch"
    ops = orjson.loads(base64.b64decode(resp["patch"]))
    assert {"op": "add", "path": "/spec/schedulingGates",
            "value": [{"name": "gpu-airlock.io/gang"}]} in ops


def test_out_of_scope_has_no_patch(policy: Policy) -> None:
    resp = answer(review(pod().cpu().build()), policy)["response"]
    assert resp == {"uid": "uid-1", "allowed": True}


def test_no_policy_fails_open_with_a_warning() -> None:
    resp = answer(review(pod().gpus(1).build()), None)["response"]
    assert resp["allowed"] is True
    assert "no valid policy" in resp["warnings"][0]


def test_denial_carries_a_message(policy: Policy) -> None:
    resp = answer(review(pod().gpus("500m").owner("Job", "j").build()), policy,
                  engine.VALIDATE)["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 403
    assert "whole number" in resp["status"]["message"]


@pytest.mark.parametrize(("obj", "message"), [
    ({"kind": "Deployment", "metadata": {"name": "d"}}, "only Pods"),
    ({"kind": "Pod", "metadata": {"labels": ["not", "a", "map"]}}, "metadata.labels"),
    ({"kind": "Pod", "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": []}}}]}},
     "spec.containers[0].resources.limits.nvidia.com/gpu"),
    ({"kind": "Pod", "spec": {"schedulingGates": "x"}}, "spec.schedulingGates"),
    ({"kind": "Pod", "spec": {"priority": "high"}}, "spec.priority"),
    ("a string", "object"),
    (None, "object"),
])
def test_badly_typed_objects_are_denied_with_the_field(policy: Policy, obj: Any,
                                                       message: str) -> None:
    for handler in (engine.MUTATE, engine.VALIDATE):
        resp = answer(review(obj, namespace="ml"), policy, handler)["response"]
        assert resp["allowed"] is False
        assert resp["status"]["code"] == 400
        assert message in resp["status"]["message"]


def test_update_with_bad_old_object_names_it(policy: Policy) -> None:
    body = review(pod().gpus(1).build(), operation="UPDATE", old={"spec": {"nodeSelector": 1}})
    resp = answer(body, policy, engine.VALIDATE)["response"]
    assert resp["allowed"] is False
    assert "oldObject.spec.nodeSelector" in resp["status"]["message"]


def test_unexpected_errors_become_an_errored_response(policy: Policy,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: Any) -> Any:
        raise RuntimeError("bug")
    monkeypatch.setattr(engine, "classify", boom)
    resp = answer(review(pod().gpus(1).build()), policy)["response"]
    assert resp["allowed"] is False
    assert resp["status"]["code"] == 500


BAD_BODIES: list[tuple[bytes, str]] = [
    (b"{not json", "not valid JSON"),
    (b"[]", "JSON object"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}),
     "apiVersion"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "Review"}), "kind"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}),
     "request"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"operation": "CREATE"}}), "uid"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "", "operation": "CREATE"}}), "uid"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "u", "operation": "PATCH"}}), "operation"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "u", "operation": "CREATE", "userInfo": 3}}), "userInfo"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                   "request": {"uid": "u", "operation": "CREATE",
                               "userInfo": {"username": "a", "groups": ["g", 3]}}}),
     "groups"),
    (b" " * (3 * 1024 * 1024 + 1), "limit"),
    # Found by a hostile fuzz: quoted whole, it raised RecursionError, answered by a 500.
    (b'{"apiVersion": ' + b"[" * 1000 + b"]" * 1000 + b"}", "got a list"),
    (orjson.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "x" * 100_000}),
     r"kind must be AdmissionReview, got 'x+'\.\.\. \(100000 characters\)$"),
]


@pytest.mark.parametrize(("body", "message"), BAD_BODIES, ids=[m for _, m in BAD_BODIES])
def test_malformed_reviews_raise_bad_review(body: bytes, message: str) -> None:
    with pytest.raises(BadReview, match=message):
        decode(body)


def test_long_warnings_are_shortened() -> None:
    from webhook.admission.responses import allowed
    out = orjson.loads(complete("u", allowed(("x" * 500,))))
    assert len(out["response"]["warnings"][0]) <= 120


def outcome(body: dict[str, Any], policy: Policy | None, handler: engine.Handler) -> Any:
    return engine.handle(handler, decode(orjson.dumps(body)), policy).outcome


def test_only_a_mutate_create_carries_an_outcome(policy: Policy) -> None:
    gpu = pod().gpus(1).build()
    assert outcome(review(gpu), policy, engine.MUTATE) == "unclassified"
    assert outcome(review(pod().cpu().build()), policy, engine.MUTATE) == "out-of-scope"
    assert outcome(review(gpu), None, engine.MUTATE) == "no-policy"
    assert outcome(review("a string"), policy, engine.MUTATE) == "bad-object"
    for handler in (engine.MUTATE, engine.VALIDATE):
        assert outcome(review(gpu, operation="UPDATE", old=gpu), policy, handler) is None
        assert outcome(review(gpu, operation="UPDATE", old=gpu), None, handler) is None
    for body in (review(gpu), review("a string")):
        assert outcome(body, policy, engine.VALIDATE) is None


@pytest.mark.parametrize(("username", "groups", "allowed"), [
    ("mallory", ["system:authenticated"], False),
    ("system:node:gpu-1", ["system:nodes", "system:authenticated"], True),
    ("admin", ["system:masters", "system:authenticated"], True),
])
def test_who_creates_a_pod_naming_its_node_is_read_from_the_review(
        policy: Policy, username: str, groups: list[str], allowed: bool) -> None:
    body = review(pod().gpus(1).owner("Job", "j").set("nodeName", "gpu-1").build(),
                  username=username)
    body["request"]["userInfo"]["groups"] = groups
    assert answer(body, policy, engine.VALIDATE)["response"]["allowed"] is allowed
