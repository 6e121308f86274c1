"""Single pods that their class queues (`classes.<c>.queued`): gated by the webhook and
admitted by the controller as gangs of one, through the same order, quotas and
preemption as gangs; once bound, single pods again."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from tests.builders import (
    HOUR,
    NOW,
    POLICY_DEFAULT,
    SEAL,
    TRAINING,
    admitted,
    cluster,
    gang,
    preempts,
    queued,
    raw_queued,
    running,
    single,
    told,
    tracked,
    waits,
)
from webhook.controller.core.actions import Admit, events_of
from webhook.controller.core.deciding import (
    DecideOptions,
    QueueState,
    Record,
    decide,
)
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.placement.reservation import Order
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.shells.cache import Cache
from webhook.controller.shells.patches import record_patch, ungate_patch
from webhook.keys import GATE, PLACEMENT_ANNOTATION, PREEMPTION_ANNOTATION

OFF = QueueState(preemption=PreemptionSettings(enabled=False))


def one(name: str) -> str:
    """A queued single's id, as `admitted` and `waits` key it."""
    return f"pod/{name}"


def test_a_queued_single_is_admitted_like_a_gang_of_one() -> None:
    raw = raw_queued("solo", 2)
    solo = PodInfo.parse(raw, SEAL)
    (admit,) = decide(tracked(cluster({"a": 1}), [solo]), {}, NOW)
    assert isinstance(admit, Admit)
    assert admit.unit == UnitId("pod", "ml", "solo")
    assert admit.anchor == solo
    assert admit.ungate == (solo,)
    assert admit.record.members == ("solo",)
    assert admit.record.size == 1
    assert admit.record.domain is None
    assert told(admit) == "Admitted: any domain; 1 pods, 2 GPUs"
    # The durable record goes on the pod itself, in the patch that lifts its gate.
    after = jsonpatch.apply_patch(raw, record_patch(solo, admit.record, SEAL)
                                  + ungate_patch(solo, admit.record))
    assert after["spec"]["schedulingGates"] == []
    assert PodInfo.parse(after, SEAL).recorded.placement == admit.record


def test_a_queued_single_over_its_queues_quota_waits_and_says_why() -> None:
    quotas = Quotas([QueueSpec("team-a", ("team-a",), nominal=8, borrowing_limit=0),
                     QueueSpec("team-b", ("team-b",), nominal=8)])
    busy = running("held", ["x-n0"], ns="team-a")
    over = queued("over", 1, ns="team-a")
    other = queued("other", 1, ns="team-b", created=1)
    state = QueueState(quotas, PreemptionSettings(enabled=False))
    actions = decide(tracked(cluster({"x": 2}), [*busy, over, other]), {}, NOW, state=state)
    assert waits(actions) == {one("over"): "Waiting: queue team-a would use 9 GPUs: "
                                           "nominal 8, borrowing limit 0"}
    assert admitted(actions) == {one("other"): None}


def test_a_queued_single_of_a_class_that_may_preempt_evicts_single_pods() -> None:
    nodes = cluster({"a": 1})
    busy = [single(f"s{i}", "a-n0", gpus=4, ran=(i + 1) * HOUR) for i in range(2)]
    raw = raw_queued("solo", 4, priority=TRAINING)
    (action,) = preempts(decide(tracked(nodes, [*busy, PodInfo.parse(raw, SEAL)]), {}, NOW))
    # The cheapest victim: the one that loses the least work.
    (victim,) = action.victims
    assert victim.unit.kind == "pod"
    assert [p.name for p in victim.pods] == ["s0"]
    told, preemptor = events_of(action)
    assert told.message == ("Preempted: a pod of higher priority needs the room; evicted to "
                            "make room for pod ml/solo (priority 50000, queue default) in "
                            "any domain, losing 4.0 GPU-hours")
    assert preemptor.message == ("Preempting: evicting pod ml/s0 to make room in any "
                                 "domain, losing 4.0 GPU-hours")
    # Next round: the record on the pod itself holds the room; the victim is gone, and the
    # pod is admitted there, nominated to the node kube-scheduler should wait for.
    raw["metadata"]["annotations"][PREEMPTION_ANNOTATION] = SEAL.dumps(
        action.record, raw["metadata"]["uid"])
    later = decide(tracked(nodes, [busy[1], PodInfo.parse(raw, SEAL)]), {}, NOW + 5)
    (admit,) = [a for a in later if isinstance(a, Admit)]
    assert admit.nominate == (("solo", "a-n0"),)


def test_a_queued_single_of_a_class_that_never_preempts_waits() -> None:
    busy = [single("s", "a-n0", gpus=8)]
    scavenger = queued("scav", 4, priority=TRAINING, preemptionPolicy="Never")
    actions = decide(tracked(cluster({"a": 1}), [*busy, scavenger]), {}, NOW)
    assert waits(actions) == {one("scav"): "Waiting: needs 4 GPUs on eligible nodes; 0 free"}


@pytest.mark.parametrize(("scheduler", "policy", "evicts"), [
    ("Never", None, False),
    # kube-scheduler is told Never, Airlock evicts: the class's `preempts: true`.
    ("Never", True, True),
    ("PreemptLowerPriority", None, True),
    ("PreemptLowerPriority", False, False),
])
def test_airlock_evicts_for_a_class_as_its_policy_says_else_as_its_priority_class(
        scheduler: str, policy: bool | None, evicts: bool) -> None:
    busy = [single("s", "a-n0", gpus=8)]
    serving = queued("serve", 4, priority=TRAINING, preemptionPolicy=scheduler,
                     priorityClassName="airlock-inference")
    stated = (("airlock-inference", policy),) if policy is not None else ()
    state = QueueState(preemption=PreemptionSettings(preempts_by_priority_class=stated))
    actions = decide(tracked(cluster({"a": 1}), [*busy, serving]), {}, NOW, state=state)
    assert bool(preempts(actions)) == evicts


def test_pods_alike_go_while_they_fit_and_only_alike_ones_wait_together() -> None:
    busy = [single("s", "a-n0", gpus=2)]
    pods = [queued(f"half-{i}", 4, created=i) for i in range(2)]
    pods += [queued(f"whole-{i}", 8, created=2 + i) for i in range(2)]
    pods.append(queued("small", 2, created=4))
    actions = decide(tracked(cluster({"a": 1}), [*busy, *pods]), {}, NOW,
                     DecideOptions(order="strict"), OFF)
    # 6 GPUs free: one 4-GPU pod fits, then neither the second nor the 8-GPU pods; in
    # strict order the first that does not fit heads the queue and the rest wait behind.
    assert admitted(actions) == {one("half-0"): None}
    assert waits(actions) == {
        one("half-1"): "Waiting: needs 4 GPUs on eligible nodes; 2 free",
        one("whole-0"): "Waiting: behind pod ml/half-1, first in the queue",
        one("whole-1"): "Waiting: behind pod ml/half-1, first in the queue",
        one("small"): "Waiting: behind pod ml/half-1, first in the queue"}
    # Pods larger than any node head nothing: each waits, and one that is not alike goes.
    wide = [queued(f"wide-{i}", 16, created=i) for i in range(2)]
    actions = decide(tracked(cluster({"a": 1}), [*busy, *wide, pods[-1]]), {}, NOW,
                     DecideOptions(order="strict"), OFF)
    assert admitted(actions) == {one("small"): None}
    assert set(waits(actions)) == {one("wide-0"), one("wide-1")}


def test_a_single_let_go_but_not_bound_keeps_its_room() -> None:
    raw = raw_queued("first", 8, gated=False)
    raw["metadata"]["annotations"][PLACEMENT_ANNOTATION] = SEAL.dumps(
        Record(None, None, ("first",), NOW - 5, 1), raw["metadata"]["uid"])
    second = queued("second", 8, created=1)
    actions = decide(tracked(cluster({"a": 1}), [PodInfo.parse(raw, SEAL), second]), {}, NOW,
                     state=OFF)
    assert waits(actions) == {one("second"): "Waiting: needs 8 GPUs on eligible nodes; "
                                             "0 free"}
    assert admitted(decide(tracked(cluster({"a": 1}), [second]), {}, NOW, state=OFF)) == \
        {one("second"): None}


def test_once_bound_a_queued_single_is_a_single_pod_again() -> None:
    bound = single("done", "a-n0", gpus=8, queued=True)
    assert bound.marks.single
    assert tracked([], [bound]).membership.gangs() == {}
    pods = [bound, *gang("train", 1, priority=TRAINING)]
    (action,) = preempts(decide(tracked(cluster({"a": 1}), pods), {}, NOW))
    (victim,) = action.victims
    assert victim.unit.kind == "pod"
    assert str(victim.unit) == "pod ml/done"


def test_a_single_and_a_gang_of_the_same_name_stay_apart() -> None:
    # The gang builder's members are solo-0, ...; the gang label is `solo`.
    actions = decide(tracked(cluster({"a": 2}), [*gang("solo", 1), queued("solo", 1)]), {}, NOW)
    assert admitted(actions) == {"solo": "a", one("solo"): None}


NEVER_FITS: dict[str, list[PodInfo]] = {
    "a gang larger than the cluster": gang("huge", 3, priority=TRAINING),
    "a pod larger than any node": [queued("wide", 16, priority=TRAINING)],
}


@pytest.mark.parametrize("order", ["strict", "backfill"])
@pytest.mark.parametrize("head", NEVER_FITS)
def test_what_can_never_fit_holds_back_nothing_behind_it(head: str, order: Order) -> None:
    small = queued("small", 1, created=1)
    actions = decide(tracked(cluster({"a": 2}), [*NEVER_FITS[head], small]), {}, NOW,
                     DecideOptions(order=order), OFF)
    assert admitted(actions) == {one("small"): None}


@pytest.mark.parametrize(("order", "why"), [
    ("strict", "Waiting: behind gang ml/next, first in the queue"),
    ("backfill", "Waiting: needs 1 GPUs; every node it may use is reserved for the first in the "
                 "queue")])
def test_what_could_fit_later_still_heads_the_queue(order: Order, why: str) -> None:
    # The head needs both nodes, one of them busy: what frees is kept for it.
    busy = running("busy", ["a-n0"])
    head = gang("next", 2, priority=TRAINING)
    small = queued("small", 1, created=1)
    actions = decide(tracked(cluster({"a": 2}), [*busy, *head, small]), {}, NOW,
                     DecideOptions(order=order), OFF)
    assert admitted(actions) == {}
    assert waits(actions)[one("small")] == why


def _cached(raw: dict[str, Any]) -> set[PodKey]:
    cache = Cache(POLICY_DEFAULT, SEAL)
    cache.list_pods([cache.parse_pod(raw)])
    return cache.gated


def test_the_cache_counts_queued_singles_as_gated_and_nothing_else() -> None:
    assert _cached(raw_queued("solo")) == {("ml", "solo")}
    assert _cached(raw_queued("solo", gated=False)) == set()
    # A gate Airlock did not queue (no mark, no gang) is none of the controller's business.
    unmarked = raw_queued("solo")
    del unmarked["metadata"]["annotations"]
    assert unmarked["spec"]["schedulingGates"] == [{"name": GATE}]
    assert _cached(unmarked) == set()


def test_a_queued_single_keeps_what_fit_reads_until_it_is_bound() -> None:
    tolerations = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    waiting = queued("solo", tolerations=tolerations, nodeSelector={"pool": "a"})
    assert waiting.marks.single
    assert waiting.constraints.tolerations == tuple(tolerations)
    assert dict(waiting.constraints.node_selector) == {"pool": "a"}
    assert waiting.constraints.devices == ("nvidia.com/gpu",)
    bound = queued("solo", gated=False, tolerations=tolerations, nodeName="a-n0")
    assert bound.marks.single
    assert bound.constraints.tolerations == ()
    assert bound.constraints.devices == ()
