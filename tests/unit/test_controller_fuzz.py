"""Whatever a tenant's pods carry, as the controller's watch delivers them (drawn from
tests/hostile.py, the controller fuzz's strategies; those the apiserver's pre-filter
sends to the webhook as its engine leaves them, or refused, the rest with every mark they
were created with): the cache reads every one, and a round, a sample and a preview of
`airlock status` run through them without raising, with a gang of another team admitted.
The same, through the real apiserver and for thousands of objects, is
`python -m bench.fuzz --controller`."""

from __future__ import annotations

from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.builders import NOW, SEAL, TRAINING, admitted, make_policy, raw_member, review
from tests.hostile import incomplete_gangs, pod_templates, reaches_webhook
from tests.strategies import patched
from webhook.accelerators import Accelerators
from webhook.admission import engine
from webhook.admission.decoding import decode
from webhook.admission.responses import complete
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.cache import Cache
from webhook.policy.model import DEFAULT_ACCELERATORS
from webhook.policy.queues import Queue
from webhook.sandbox.nodes import Shape, topology

TENANT = "mallory"
# The tenant's queue may borrow a little; the canary's team is guaranteed its gang.
POLICY = make_policy(queues=(
    Queue.model_validate({"name": "tenant", "namespaces": [TENANT],
                          "nominal": {"nvidia.com/gpu": 0},
                          "borrowingLimit": {"nvidia.com/gpu": 8}}),
    Queue.model_validate({"name": "team", "namespaces": ["team"],
                          "nominal": {"nvidia.com/gpu": 16}})))
READY = {"conditions": [{"type": "Ready", "status": "True"}]}
# The sandbox's nodes, by the names the strategies' nodeName picks from, once KWOK has
# them Ready.
NODES = [NodeInfo.parse({**n, "status": {**n["status"], **READY}})
         for n in topology(Shape(nodes=8, nodes_per_domain=4))]


def _admitted(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod as the webhook leaves it, when the apiserver's pre-filter sends it there:
    mutated, then validated; None when either refuses it."""
    if not reaches_webhook(pod):
        return pod
    for handler in (engine.MUTATE, engine.VALIDATE):
        answer = complete("uid-1", engine.handle(handler, decode(orjson.dumps(review(pod))),
                                                 POLICY))
        if not orjson.loads(answer)["response"]["allowed"]:
            return None
        if handler is engine.MUTATE:
            pod = patched(pod, answer) or pod
    return pod


def _stored(i: int, obj: dict[str, Any], running: bool) -> dict[str, Any] | None:
    """The pod as the apiserver stores it, or None when admission refuses it: named, in
    the tenant's namespace, created before the canary; with a node name, running there."""
    meta = {**obj["metadata"], "name": f"h-{i}", "namespace": TENANT, "uid": f"uid-h-{i}",
            "creationTimestamp": "2026-11-22T09:00:00Z"}
    stored = _admitted({"apiVersion": "v1", "kind": "Pod", "metadata": meta,
                        "spec": obj["spec"]})
    if stored is not None and running and stored["spec"].get("nodeName"):
        stored["status"] = {"phase": "Running", "startTime": "2026-11-22T09:00:01Z"}
    return stored


_tenants = st.tuples(st.lists(pod_templates(), min_size=1, max_size=12),
                     st.lists(incomplete_gangs(), max_size=2), st.booleans())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tenants)
def test_no_pod_a_tenant_writes_fails_the_cache_or_a_round(
        drawn: tuple[list[dict[str, Any]], list[list[dict[str, Any]]], bool]) -> None:
    templates, gangs, running = drawn
    drawn_pods = [*templates, *(p for g in gangs for p in g)]
    hostile = [p for i, t in enumerate(drawn_pods) if (p := _stored(i, t, running))]
    canary = [raw_member("canary", i, size=2, ns="team", mode="preferred", priority=TRAINING,
                         created=30) for i in range(2)]
    cache = Cache(Accelerators.of(DEFAULT_ACCELERATORS), SEAL)
    cache.list_nodes(NODES)
    cache.list_pods([cache.parse_pod(p) for p in [*hostile, *canary]])
    assert cache.unreadable == 0, [p.invalid for p in cache.pods.values() if p.invalid]
    rounds = Rounds()
    actions = rounds.run(POLICY, cache.cluster, NOW)
    assert "canary" in admitted(actions)
    rounds.accounts.sample(POLICY, cache.cluster, NOW + 10)
    rounds.preview(POLICY, cache.cluster, NOW + 10)
