"""The controller acts only on records it can prove it wrote: a forged preemption evicts
nobody and a forged placement lifts no gate, whatever namespace they name; a record of its
own is finished only where a fresh plan could still evict the same pods."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.builders import (
    NOW,
    SEAL,
    TRAINING,
    cluster,
    preempts,
    raw_member,
    running,
    single,
    tracked,
    victims_record,
    waits,
)
from webhook.controller.core.actions import Admit, Finish, Ignore
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Budget
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.records import PreemptionRecord, Record, Seal
from webhook.keys import PLACEMENT_ANNOTATION, PREEMPTION_ANNOTATION

INFERENCE = 100_000
FORGER = Seal(b"a-key-mallory-made-up-herself!!!", 0.0, lambda: NOW)


def _mallory(annotations: dict[str, str], n: int = 2, gated: bool = True) -> list[PodInfo]:
    """Mallory's gang, its first pod carrying `annotations` she wrote herself."""
    raws = [raw_member("m", i, 8, n, ns="mallory", gated=gated) for i in range(n)]
    raws[0]["metadata"]["annotations"].update(annotations)
    return [PodInfo.parse(r, SEAL) for r in raws]


def _serving() -> list[PodInfo]:
    return [single("vllm-0", "a-n0", gpus=8, ns="prod", priority=INFERENCE)]


@pytest.mark.parametrize("how", ["unsealed", "sealed with another key", "copied"])
def test_a_forged_preemption_evicts_nobody(how: str) -> None:
    serving = _serving()
    record = victims_record("a", serving, ["a-n0"], NOW - 5)
    text = {"unsealed": json.dumps(record.body()),
            "sealed with another key": FORGER.dumps(record, "uid-mallory-m-0"),
            # A record Airlock wrote on another pod, copied onto hers.
            "copied": SEAL.dumps(record, "uid-prod-someone-else")}[how]
    pods = serving + _mallory({PREEMPTION_ANNOTATION: text})
    actions = decide(tracked(cluster({"a": 1}), pods), {}, NOW)
    assert not [v for p in preempts(actions) for v in p.victims]
    (ignored,) = [a for a in actions if isinstance(a, Ignore)]
    assert [p.name for p in ignored.pods] == ["m-0"]
    assert ignored.message.startswith("RecordIgnored: Airlock does not act on its "
                                      "gpu-airlock.io/preemption record")


def test_a_forged_placement_lifts_no_gate_past_the_quota() -> None:
    quotas = Quotas([QueueSpec("mallory", ("mallory",), nominal=0, borrowing_limit=0)])
    forged = Record(None, None, ("m-0", "m-1"), NOW - 5, 2)
    pods = _mallory({PLACEMENT_ANNOTATION: json.dumps(forged.body())})
    actions = decide(tracked(cluster({"a": 2}), pods), {}, NOW, state=QueueState(quotas))
    assert not [a for a in actions if isinstance(a, Admit | Finish)]
    assert waits(actions)["m"].startswith("Waiting: 2/2 pods present; queue mallory would use")
    assert any(isinstance(a, Ignore) for a in actions)


def test_a_forged_record_on_a_pod_that_waits_for_nothing_is_still_told() -> None:
    pods = _mallory({PREEMPTION_ANNOTATION: "{}"}, gated=False)
    (ignored,) = [a for a in decide(tracked(cluster({"a": 2}), pods), {}, NOW)
                  if isinstance(a, Ignore)]
    assert "carries no seal" in ignored.message


def _resumed(victims: list[PodInfo], state: QueueState, ns: str = "ml",
             priority: int = TRAINING) -> list[Any]:
    """A round after a leader recorded a preemption of `victims` for gang `train` and died
    before evicting them."""
    record: PreemptionRecord = victims_record("a", victims, ["a-n0", "a-n1"], NOW - 5)
    raws = [raw_member("train", i, 8, 2, ns=ns, priority=priority) for i in range(2)]
    raws[0]["metadata"]["annotations"][PREEMPTION_ANNOTATION] = SEAL.dumps(
        record, raws[0]["metadata"]["uid"])
    train = [PodInfo.parse(r, SEAL) for r in raws]
    return decide(tracked(cluster({"a": 2}), victims + train), {}, NOW, state=state)


@pytest.mark.parametrize(("victims", "state", "why"), [
    (running("sys", ["a-n0", "a-n1"], ns="gpu-operator"),
     QueueState(spared=frozenset({"gpu-operator"})), "out of Airlock's scope"),
    (running("s", ["a-n0", "a-n1"]),
     QueueState(preemption=PreemptionSettings(enabled=False)), "turned off"),
    (running("s", ["a-n0", "a-n1"], priority=INFERENCE), QueueState(),
     "no longer has a lower priority"),
    (running("s", ["a-n0", "a-n1"]),
     QueueState(budgets=(Budget("ml/s", 1, frozenset({PodKey("ml", "s-0"),
                                                       PodKey("ml", "s-1")})),)),
     "PodDisruptionBudget ml/s"),
])
def test_a_resumed_preemption_passes_the_checks_of_a_fresh_plan(
        victims: list[PodInfo], state: QueueState, why: str) -> None:
    actions = _resumed(victims, state)
    assert not [v for p in preempts(actions) for v in p.victims]
    (ignored,) = [a for a in actions if isinstance(a, Ignore)]
    assert ignored.unit == UnitId("gang", "ml", "train")
    assert why in ignored.message


def test_a_resumed_preemption_that_passes_the_checks_is_finished() -> None:
    (resumed,) = preempts(_resumed(running("s", ["a-n0", "a-n1"]), QueueState()))
    assert {p.name for v in resumed.victims for p in v.pods} == {"s-0", "s-1"}
    assert [v.cause for v in resumed.victims] == ["priority"]
