"""Admission of pods that claim their GPUs through DRA (`spec.resourceClaims`), with the
shipped policy's DeviceClasses: classified, prioritized, tolerated, gated and recorded
like pods that request `nvidia.com/gpu`; refused, with why, while a claim they name is
unknown; judged without their claims under `--dra none`."""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any, cast

import jsonpatch
import orjson
import pytest

from tests.builders import (
    claim_template,
    claiming,
    pod,
    resource_claim,
    review,
    shipped_policy,
)
from webhook.admission import engine
from webhook.admission.claiming import Claims, entry
from webhook.admission.claimwatching import ClaimCache
from webhook.admission.decoding import decode
from webhook.admission.responses import complete
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CLASS_LABEL,
    GATE,
    PREFERRED_TOPOLOGY_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)

CHANNEL = "compute-domain-default-channel.nvidia.com"


def book(*objs: dict[str, Any]) -> Claims:
    """The claims a webhook's cache would hold."""
    found = {}
    for obj in objs:
        e = entry(obj, obj["kind"])
        assert e is not None
        found[e[1]] = e[2]
    return found


def answer(obj: dict[str, Any], claims: Claims | None,
           handler: engine.Handler = engine.MUTATE) -> dict[str, Any]:
    request = decode(orjson.dumps(review(obj)))
    out: dict[str, Any] = orjson.loads(complete(
        request.uid, engine.handle(handler, request, shipped_policy(), claims)))
    response: dict[str, Any] = out["response"]
    return response


def patched(response: dict[str, Any], obj: dict[str, Any]) -> dict[str, Any]:
    ops = orjson.loads(base64.b64decode(response["patch"])) if "patch" in response else []
    result: dict[str, Any] = jsonpatch.apply_patch(obj, ops)
    return result


def pytorch_worker(template: str = "eight-gpus") -> dict[str, Any]:
    return claiming(pod("llama-worker-0").label("training.kubeflow.org/job-name", "llama")
                    .annotation("gpu-airlock.io/gang-size", "2"), template=template).build()


def test_a_gang_pod_claiming_gpus_is_governed_like_one_requesting_them() -> None:
    obj = pytorch_worker()
    response = answer(obj, book(claim_template("eight-gpus")))
    assert response["allowed"]
    out = patched(response, obj)
    assert out["metadata"]["labels"][CLASS_LABEL] == "training"
    assert out["spec"]["priorityClassName"] == "airlock-training"
    assert {"name": GATE} in out["spec"]["schedulingGates"]
    assert any(t.get("key") == "nvidia.com/gpu" for t in out["spec"]["tolerations"])
    assert out["metadata"]["annotations"][ACCELERATORS_ANNOTATION] == \
        "dra.gpu-airlock.io/gpu.nvidia.com"


def test_a_bare_pod_claiming_gpus_takes_the_default_class() -> None:
    obj = claiming(pod("notebook"), claim="shared-gpus").build()
    out = patched(answer(obj, book(resource_claim("shared-gpus", count=1))), obj)
    assert out["metadata"]["labels"][CLASS_LABEL] == "scavenger"
    assert out["spec"]["priorityClassName"] == "airlock-scavenger"


def test_a_pod_claiming_no_gpu_is_left_alone() -> None:
    obj = claiming(pod("nic-user"), template="nics").build()
    response = answer(obj, book(claim_template("nics", "nic.example.com", 1)))
    assert response["allowed"]
    assert "patch" not in response


@pytest.mark.parametrize("handler", [engine.MUTATE, engine.VALIDATE])
def test_a_claim_not_seen_yet_is_refused_with_why(handler: engine.Handler) -> None:
    response = answer(pytorch_worker("later"), {}, handler)
    assert not response["allowed"]
    assert response["status"]["code"] == 409
    assert "ResourceClaimTemplate ml/later, which Airlock has not seen" in \
        response["status"]["message"]


def test_an_unknown_claim_does_not_stop_a_pod_airlock_leaves_alone() -> None:
    obj = claiming(pod("system", namespace="kube-system").gpus(1), template="later").build()
    assert answer(obj, {})["allowed"]


def test_without_claims_read_a_pod_is_judged_without_them() -> None:
    """`--dra none`: the pod passes as one that asks for no GPU."""
    obj = claiming(pod("notebook"), template="eight-gpus").build()
    response = answer(obj, None)
    assert response["allowed"]
    assert "patch" not in response


# The DeviceClass's level wins over any level the gang asks for.
@pytest.mark.parametrize("asked", [None, "host"])
def test_a_gang_claiming_an_imex_channel_must_share_one_nvlink_domain(asked: str | None
                                                                      ) -> None:
    worker = pod("llama-worker-0").label("training.kubeflow.org/job-name", "llama")
    if asked is not None:
        worker.annotation(PREFERRED_TOPOLOGY_ANNOTATION, asked)
    obj = claiming(claiming(worker, template="eight-gpus"), template="channel").build()
    out = patched(answer(obj, book(claim_template("eight-gpus"),
                                   claim_template("channel", CHANNEL, 1))), obj)
    annotations = out["metadata"]["annotations"]
    assert annotations[TOPOLOGY_KEY_ANNOTATION] == "nvidia.com/gpu.clique"
    assert annotations[TOPOLOGY_MODE_ANNOTATION] == "required"
    terms = out["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert {"key": "nvidia.com/gpu.clique", "operator": "Exists"} in \
        terms[0]["matchExpressions"]


def test_a_claim_not_seen_is_waited_for_no_longer_than_the_review_may_take() -> None:
    # The cache would wait an hour for a claim; the review's budget is spent already.
    cache = ClaimCache(cast(Any, None), wait=3600)

    async def look() -> Claims | None:
        return await asyncio.wait_for(
            cache.lookup("ml", [("ResourceClaim", "shared-gpus")], time.monotonic()), 30)
    assert asyncio.run(look()) == {}
