"""Every way a gang waits has its code, and each code comes from one situation: a table of
the situations, each giving the code a person (and `airlock status`, and the metric)
reads."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import pytest

from tests.builders import (
    CLIQUE,
    NOW,
    SEAL,
    TRAINING,
    cluster,
    gang,
    member,
    queued,
    raw_member,
    running,
    tracked,
    unit,
    victims_record,
)
from webhook.controller.core.actions import Action, Wait, events_of
from webhook.controller.core.deciding import DecideOptions, QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.reasons import MEANING, WAIT_REASONS
from webhook.controller.core.records import Record
from webhook.conventions.base import SizeUnknown
from webhook.keys import (
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    PREEMPTION_ANNOTATION,
)

ELASTIC = {GANG_EXPECTED_MIN_ANNOTATION: "2"}
NO_PREEMPTION = QueueState(preemption=PreemptionSettings(enabled=False))


def _awaiting_victims() -> list[Action]:
    terminating = [dataclasses.replace(p, deleting=True) for p in running("s", ["a-n0"])]
    record = victims_record("a", terminating, ["a-n0"], NOW - 5)
    raw = raw_member("train", 0, 8, 1, priority=TRAINING)
    raw["metadata"]["annotations"][PREEMPTION_ANNOTATION] = SEAL.dumps(
        record, raw["metadata"]["uid"])
    return decide(tracked(cluster({"a": 1}), [*terminating, PodInfo.parse(raw, SEAL)]),
                  {}, NOW)


SITUATIONS: dict[str, Callable[[], list[Action]]] = {
    "Incomplete": lambda: decide(tracked(cluster({"a": 2}), gang("train", 4)[:2]), {}, NOW),
    "SizeUnknown": lambda: decide(tracked(cluster({"a": 2}), [member("train", 0)]),
                                  {unit("train"): SizeUnknown("PyTorchJob not installed")},
                                  NOW),
    "Oversize": lambda: decide(tracked(cluster({"a": 4}),
                                       [member("train", i, size=2) for i in range(3)]), {}, NOW),
    "BehindHead": lambda: decide(tracked(cluster({"a": 2}), [
        *running("busy", ["a-n0"]), *gang("head", 2, created=1), *gang("train", 1, created=2)]),
        {}, NOW, DecideOptions(order="strict"), NO_PREEMPTION),
    "BackingOff": lambda: decide(tracked(cluster({"a": 2}), gang("train", 2)), {}, NOW,
                                 state=QueueState(evicted={unit("train"): NOW - 10})),
    # A single pod: no topology to share, only nodes.
    "NoRoom": lambda: decide(tracked(cluster({"a": 1}), [
        *running("busy", ["a-n0"]), queued("train", 8)]), {}, NOW, state=NO_PREEMPTION),
    "NoDomainFits": lambda: decide(tracked(cluster({"a": 2, "b": 2}), [
        *running("busy", ["a-n0", "b-n0"]), *gang("train", 2)]), {}, NOW, state=NO_PREEMPTION),
    "NeverFits": lambda: decide(tracked(cluster({"a": 2}), gang("train", 3)), {}, NOW),
    "OverQuota": lambda: decide(tracked(cluster({"a": 2}), gang("train", 2)), {}, NOW,
                                state=QueueState(Quotas([QueueSpec("ml", ("ml",), nominal=8,
                                                                   borrowing_limit=0)]))),
    "AwaitingVictims": _awaiting_victims,
    # Room it would fit in now: it waits for the room it asked for instead.
    "AwaitingCapacity": lambda: decide(tracked(cluster({"a": 2}), gang("train", 2)), {}, NOW,
                                       state=QueueState(awaiting=frozenset({unit("train")}))),
    # An elastic gang of 4 (minimum 2) runs 3 in domain a, full; its fourth waits.
    "Growing": lambda: decide(tracked(cluster({"a": 3}), [
        member("train", i, size=4, gated=False, node_name=f"a-n{i}", marks=ELASTIC,
               nodeSelector={CLIQUE: "a"},
               placement=Record("a", CLIQUE, ("train-0", "train-1", "train-2"), NOW, 4,
                                minimum=2) if i == 0 else None) for i in range(3)]
        + [member("train", 3, size=4, marks=ELASTIC)]), {}, NOW),
    # A member with a size of 400 digits: no webhook writes one.
    "Invalid": lambda: decide(tracked(cluster({"a": 2}), [
        member("train", 0, size=2), member("train", 1, marks={
            GANG_EXPECTED_SIZE_ANNOTATION: "9" * 400})]), {}, NOW),
}


def test_every_code_has_a_situation_and_a_meaning() -> None:
    assert set(SITUATIONS) == set(WAIT_REASONS) == set(MEANING)


def _wait(code: str) -> Wait:
    (wait,) = [a for a in SITUATIONS[code]() if isinstance(a, Wait)
               and a.unit.name == "train"]
    return wait


@pytest.mark.parametrize("code", SITUATIONS)
def test_each_situation_gives_its_code_and_the_event_carries_it(code: str) -> None:
    wait = _wait(code)
    assert wait.reason == code
    (event,) = events_of(wait)
    assert event.reason == code


@pytest.mark.parametrize(("code", "warning", "lead"), [
    ("Incomplete", True, "Incomplete"), ("Oversize", True, "Oversize"),
    ("SizeUnknown", True, "SizeUnknown"), ("NoRoom", False, "Waiting")])
def test_a_message_starts_with_the_word_people_scan_for(code: str, warning: bool, lead: str,
                                                        ) -> None:
    wait = _wait(code)
    assert wait.warning is warning
    assert wait.message.startswith(f"{lead}: ")
