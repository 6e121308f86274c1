"""GPU models in the pure core: each pod is charged to the model of the node it runs on,
a gang lands whole on one model, tried in its queue's order within the queue's quota of
each, borrowing as the queue's fungibility says, pinned there by the model's labels."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import (
    GPU_MODELS,
    HOUR,
    NOW,
    PRODUCT,
    PRODUCTS,
    TRAINING,
    gang,
    make_policy,
    member,
    model_node,
    models_cluster,
    pod,
    preempting,
    preempts,
    running,
    tracked,
    victims_record,
    waits,
)
from webhook.admission.explaining import explain_pod
from webhook.controller.core.actions import Action, Admit, Wait
from webhook.controller.core.configuring import quotas_of
from webhook.controller.core.growth.asking import CapacitySettings, grow
from webhook.controller.core.growth.placeholders import manifest, requested
from webhook.controller.core.growth.provisioning import class_for, objects
from webhook.controller.core.records import Record
from webhook.controller.core.reporting import report
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.patches import ungate_patch
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.operators.karpenter.keys import NODE_POOL_LABEL
from webhook.policy.capacity import CapacitySpec
from webhook.policy.queues import Queue


def _policy(*models: dict[str, Any], **queue: Any) -> Any:
    return make_policy(gpu_models=GPU_MODELS, queues=(Queue.model_validate(
        {"name": "team-a", "namespaces": ["team-a"], "models": list(models), **queue}),))


def _models(actions: list[Action]) -> dict[str, tuple[str | None, dict[str, str]]]:
    return {a.unit.name: (a.record.model, dict(a.record.model_labels))
            for a in actions if isinstance(a, Admit)}


def _round(policy: Any, *pods: Any, nodes: Any = None) -> list[Action]:
    cluster = tracked(nodes or models_cluster(h100=2, a100=2), [p for ps in pods for p in ps])
    return Rounds().run(policy, cluster, NOW)


def test_a_gang_takes_the_first_model_within_quota_and_is_pinned_to_it() -> None:
    policy = _policy({"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 16})
    actions = _round(policy, gang("g1", 1, ns="team-a", created=1),
                     gang("g2", 1, ns="team-a", created=2),
                     gang("g3", 1, ns="team-a", created=3))
    h100 = ("h100", {PRODUCT: "NVIDIA-H100-80GB-HBM3"})
    a100 = ("a100", {PRODUCT: "NVIDIA-A100-SXM4-80GB"})
    # g1 fills the queue's 8 H100s; g2 and g3 move on to its A100s rather than borrow.
    assert _models(actions) == {"g1": h100, "g2": a100, "g3": a100}


def test_with_its_quota_of_every_model_used_it_borrows_the_first_that_lends() -> None:
    policy = _policy({"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 8})
    actions = _round(policy, *(gang(f"g{i}", 1, ns="team-a", created=i) for i in range(3)))
    assert {g: m for g, (m, _) in _models(actions).items()} == \
        {"g0": "h100", "g1": "a100", "g2": "h100"}


def test_borrow_first_borrows_the_first_model_before_it_moves_on() -> None:
    policy = _policy({"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 16},
                     fungibility="BorrowFirst")
    actions = _round(policy, *(gang(f"g{i}", 1, ns="team-a", created=i) for i in range(2)))
    assert {g: m for g, (m, _) in _models(actions).items()} == {"g0": "h100", "g1": "h100"}


def test_a_pod_that_names_models_gets_one_of_them_in_its_order() -> None:
    policy = _policy({"model": "h100", "nominal": 16}, {"model": "a100", "nominal": 16})
    named = gang("named", 1, ns="team-a", marks={GPU_MODELS_ANNOTATION: "a100, h100"})
    assert {g: m for g, (m, _) in _models(_round(policy, named)).items()} == {"named": "a100"}


def test_a_pod_that_names_only_models_its_queue_may_not_use_is_told() -> None:
    policy = _policy({"model": "h100", "nominal": 16})
    named = gang("named", 1, ns="team-a", marks={GPU_MODELS_ANNOTATION: "a100"})
    assert waits(_round(policy, named)) == {
        "named": "Waiting: its pods name GPU models a100, none of which its queue team-a may use"}


def test_a_running_pod_is_charged_to_its_nodes_model() -> None:
    # team-a's 8 H100s are all held by what runs there, and it may not borrow: the next
    # gang waits over its H100 quota although an H100 node is free.
    policy = _policy({"model": "h100", "nominal": 8, "borrowingLimit": 0})
    busy = running("busy", ["h100-n0"], ns="team-a")
    assert waits(_round(policy, busy, gang("next", 1, ns="team-a"))) == {
        "next": "Waiting: 1/1 pods present; h100: queue team-a would use 16 GPUs: nominal 8, "
                "borrowing limit 0"}


def test_a_queue_without_quotas_per_model_still_lands_whole_on_one_model() -> None:
    # Two free H100 GPUs and six free A100s: eight GPUs in all, but on no one model.
    policy = make_policy(gpu_models=GPU_MODELS)
    nodes = models_cluster(h100=1, a100=1)
    busy = running("h", ["h100-n0"], gpus=6) + running("a", ["a100-n0"], gpus=2)
    actions = _round(policy, busy, gang("split", 2, gpus=4), nodes=nodes)
    assert not _models(actions)
    assert "split" in waits(actions)


def test_a_node_relabelled_takes_what_its_pods_hold_to_its_new_model() -> None:
    nodes = models_cluster(h100=1, a100=1)
    cluster = tracked(nodes, running("busy", ["h100-n0"], ns="team-a"))
    cluster.sort_models(GPU_MODELS)
    assert cluster.models.held == {"h100": {"team-a": 8}}
    assert cluster.models.total == {"h100": 8, "a100": 8}
    cluster.put_node(model_node("h100-n0", "a100"))
    assert cluster.models.held == {"h100": {}, "a100": {"team-a": 8}}
    assert cluster.models.total == {"h100": 0, "a100": 16}


def test_a_queue_with_quotas_per_model_only_is_guaranteed_their_sum() -> None:
    policy = _policy({"model": "h100", "nominal": 8, "borrowingLimit": 4},
                     {"model": "a100", "nominal": 16, "borrowingLimit": 0, "lendingLimit": 2})
    spec = quotas_of(policy, policy.counted()).spec("team-a")
    # No lending limit on h100 is no limit over both.
    assert (spec.nominal, spec.borrowing_limit, spec.lending_limit) == (24, 4, None)


def test_the_record_keeps_the_model_and_the_ungate_pins_each_member_to_it() -> None:
    pins = ((PRODUCT, "NVIDIA-H100-80GB-HBM3"),)
    record = Record(None, None, ("g-0",), NOW, 1, model="h100", model_labels=pins)
    assert Record.of(record.body()) == record
    assert {"op": "add", "path": "/spec/nodeSelector", "value": dict(pins)} in \
        ungate_patch(member("g", 0, size=1), record)


def test_status_shows_each_queues_quota_and_use_of_each_model() -> None:
    policy = _policy({"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 16})
    busy = running("busy", ["h100-n0", "h100-n1"], ns="team-a")
    found = report(policy, tracked(models_cluster(h100=2, a100=1), busy, policy.counted()),
                   [], NOW, {})
    assert [(m.queue, m.model, m.nominal, m.used, m.borrowed) for m in found.models] == [
        ("team-a", "h100", 8, 16, 8), ("team-a", "a100", 16, 0, 0)]
    assert found.as_json()["models"][0] == {"queue": "team-a", "model": "h100", "nominal": 8,
                                            "used": 16, "borrowed": 8}
    assert "team-a           h100            8    16         8" in found.text()
    # The policy's L4s are on no node: a label mistyped, or a pool not there yet.
    assert found.as_json()["modelsWithoutNodes"] == ["l4"]
    assert "GPU model l4: no node has its labels" in found.text()


def test_a_gang_whose_pods_name_different_models_is_told_and_not_placed() -> None:
    policy = _policy({"model": "h100", "nominal": 16}, {"model": "a100", "nominal": 16})
    mixed = [member("mixed", i, size=2, ns="team-a",
                    marks={GPU_MODELS_ANNOTATION: model}) for i, model in enumerate(
                        ("h100", "a100"))]
    actions = _round(policy, mixed)
    assert not _models(actions)
    assert waits(actions)["mixed"].endswith(
        "its pods name different GPU models: mixed-0 (h100), mixed-1 (a100); a gang runs on "
        "one model, so give every pod the same gpu-airlock.io/gpu-models and DRA claims")


def test_a_gang_that_preempts_evicts_only_work_on_its_model() -> None:
    # Both models full of scavengers; the A100's are the cheaper victims (run for less),
    # but the gang may use only H100s.
    policy = _policy({"model": "h100", "nominal": 16})
    scavengers = running("old", ["h100-n0"], ran=4 * HOUR) + \
        running("young", ["a100-n0"], ran=HOUR)
    rounds = Rounds()
    rounds.accounts.list_pdbs([])  # no budget stands in the way
    cluster = tracked(models_cluster(h100=1, a100=1),
                      scavengers + gang("urgent", 1, ns="team-a", priority=TRAINING))
    (preempt,) = preempts(rounds.run(policy, cluster, NOW))
    assert [str(v.unit) for v in preempt.victims] == ["gang ml/old"]


@pytest.mark.parametrize(("namespace", "named", "selector", "expected"), [
    # Its queue's order.
    ("team-a", None, {}, ["h100", "a100"]),
    # Those it names, in its order, that the queue allows.
    ("team-a", "l4,a100,h100", {}, ["a100", "h100"]),
    # Its node selector on the model label leaves one.
    ("team-a", None, {PRODUCT: PRODUCTS["a100"]}, ["a100"]),
    ("team-a", "h100", {PRODUCT: PRODUCTS["a100"]}, []),
    # A namespace in no queue may use every model.
    ("elsewhere", None, {}, ["h100", "a100", "l4"]),
])
def test_explain_says_which_models_a_pod_may_get(namespace: str, named: str | None,
                                                  selector: dict[str, str],
                                                  expected: list[str]) -> None:
    policy = _policy({"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 16})
    b = pod(namespace=namespace).gpus(1).owner("Job", "j").set("nodeSelector", selector)
    if named is not None:
        b.annotation(GPU_MODELS_ANNOTATION, named)
    assert explain_pod(b.build(), policy, {})["gpuModels"] == expected


def _two_queues(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> Any:
    return make_policy(gpu_models=GPU_MODELS, queues=tuple(Queue.model_validate(
        {"name": f"team-{q}", "namespaces": [f"team-{q}"], "models": models})
        for q, models in (("a", a), ("b", b))))


@pytest.mark.parametrize(("a", "b", "running_b", "victims"), [
    # team-b borrows H100 but holds no more than its queue's nominal over both models
    # (8 H100 + 8 A100 against 16 A100): its H100s are reclaimed all the same, and its
    # A100 work stays.
    ([{"model": "h100", "nominal": 8}], [{"model": "a100", "nominal": 16}],
     {"h100": ["h100-n0"], "a100": ["a100-n0"]}, ["gang team-b/b-h100"]),
    # team-b's own H100 quota is not reclaimed though it borrows A100s (over its queue's
    # nominal over both models): it is A100 that it borrows.
    ([{"model": "h100", "nominal": 8}], [{"model": "h100", "nominal": 8}],
     {"h100": ["h100-n0"], "a100": ["a100-n0"]}, []),
    # team-a is below its nominal over both models, but at its H100 quota: taking more
    # H100 is borrowing, which reclaims nothing.
    ([{"model": "h100", "nominal": 0}, {"model": "a100", "nominal": 16}], [],
     {"h100": ["h100-n0"]}, []),
])
def test_borrowing_of_one_model_is_reclaimed_on_that_model_only(
        a: list[dict[str, Any]], b: list[dict[str, Any]], running_b: dict[str, list[str]],
        victims: list[str]) -> None:
    # team-a's gang may use only H100s, and outranks nothing: what it takes, it reclaims.
    urgent = gang("urgent", 1, ns="team-a", marks={GPU_MODELS_ANNOTATION: "h100"})
    work = [p for model, nodes in running_b.items()
            for p in running(f"b-{model}", nodes, ns="team-b")]
    rounds = Rounds()
    rounds.accounts.list_pdbs([])
    cluster = tracked(models_cluster(h100=1, a100=2), work + urgent)
    found = preempts(rounds.run(_two_queues(a, b), cluster, NOW))
    assert [str(v.unit) for p in found for v in p.victims] == victims
    assert all(v.cause == "reclaim" for p in found for v in p.victims)


@pytest.mark.parametrize(("named", "model", "pins", "provisioning_class"), [
    ("h100", "h100", {PRODUCT: PRODUCTS["h100"], NODE_POOL_LABEL: "gpu-h100"},
     "queued-provisioning.gke.io"),
    # A model that names no NodePool or class: its labels, and the policy's class.
    ("a100", "a100", {PRODUCT: PRODUCTS["a100"]}, CapacitySpec().provisioning_class),
])
def test_a_gang_that_waits_for_capacity_asks_for_its_models_nodes(
        named: str, model: str, pins: dict[str, str], provisioning_class: str) -> None:
    models = (GPU_MODELS[0].model_copy(update={
        "node_pool": "gpu-h100", "provisioning_class": "queued-provisioning.gke.io"}),
        *GPU_MODELS[1:])
    policy = make_policy(gpu_models=models, queues=(Queue.model_validate(
        {"name": "team-a", "namespaces": ["team-a"],
         "models": [{"model": "h100", "nominal": 64}, {"model": "a100", "nominal": 64}]}),))
    # Two 8-GPU pods, one node of each model: it fits on neither, and more nodes of the
    # model it names would let it in.
    big = gang("big", 2, ns="team-a", marks={GPU_MODELS_ANNOTATION: named})
    actions = _round(policy, big, nodes=models_cluster(h100=1, a100=1))
    (wait,) = [a for a in actions if isinstance(a, Wait)]
    assert (wait.may_grow, wait.model) == (True, model)
    (request,) = grow(actions, quotas_of(policy, policy.counted()), [], {}, NOW,
                      CapacitySettings()).make
    assert request.model == model
    placeholder = manifest(request.unit, request.pods[0], 0, (),
                           requested(policy.gpu_models, request.model))
    assert placeholder["spec"]["nodeSelector"] == pins
    default = policy.capacity.provisioning_class
    *templates, pr = objects(request.unit, request.pods, class_for(
        policy.gpu_models, request.model, default), (), requested(policy.gpu_models, model))
    assert pr["spec"]["provisioningClassName"] == provisioning_class
    assert templates[0]["template"]["spec"]["nodeSelector"] == pins


def test_a_preemptor_awaiting_its_victims_holds_its_queues_quota_of_the_model() -> None:
    # `train` evicted team-b's H100 pods (terminating); team-a's 8 H100s are held for it,
    # so `next` goes to the A100s, not to the free H100 node past the H100 quota.
    policy = _two_queues([{"model": "h100", "nominal": 8, "borrowingLimit": 0},
                          {"model": "a100", "nominal": 8}], [])
    terminating = [dataclasses.replace(p, deleting=True)
                   for p in running("old", ["h100-n0"], ns="team-b")]
    train = preempting(1, victims_record(None, terminating, ["h100-n0"], NOW - 5),
                       ns="team-a")
    later = gang("next", 1, ns="team-a", created=1)
    actions = _round(policy, terminating, train, later, nodes=models_cluster(h100=2, a100=1))
    assert "not all gone yet" in waits(actions)["train"]
    assert {g: m for g, (m, _) in _models(actions).items()} == {"next": "a100"}
