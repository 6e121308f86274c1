"""The checkpoint handshake: a victim told first, evicted once it answers (a checkpoint
stated since its notice) or at the deadline, the preemptor's room held all the while."""

from __future__ import annotations

import datetime

import pytest

from tests.builders import (
    HOUR,
    NOW,
    SEAL,
    TRAINING,
    admitted,
    cluster,
    gang,
    preempting,
    preempts,
    raw_member,
    running,
    tracked,
    unit,
    victims_record,
)
from webhook.controller.core.actions import Preempt, Victim, events_of
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.preemption.notices import due
from webhook.controller.shells.patches import notice_condition
from webhook.keys import PREEMPTION_NOTICE_ANNOTATION, PREEMPTION_NOTICE_CONDITION

GRACE = 600.0
TOLD = QueueState(preemption=PreemptionSettings(checkpoint_grace=GRACE))


def _victim(*checkpointed: float | None) -> Victim:
    """A victim gang of a pod per value, each checkpointed that many seconds before NOW
    (None: never)."""
    pods = [pod for i, ago in enumerate(checkpointed)
            for pod in running("s", [f"a-n{i}"], checkpointed=ago)]
    return Victim(tuple(pods), unit("s"), "default", 0, 8 * len(pods), 0.0, NOW - HOUR)


@pytest.mark.parametrize(("grace", "told_ago", "checkpointed", "goes"), [
    (0.0, 0.0, (None,), True),  # no handshake: evicted at once
    (GRACE, 10.0, (None,), False),  # told, silent, before the deadline: waits
    (GRACE, 10.0, (5.0,), True),  # answered: a checkpoint since the notice
    (GRACE, 9.5, (10.0,), True),  # in the notice's second: RFC 3339 to the second
    (GRACE, 10.0, (30.0,), False),  # a checkpoint from before the notice is no answer
    (GRACE, 10.0, (5.0, None), False),  # one pod of two saved: the other would lose all
    (GRACE, 10.0, (5.0, 1.0), True),  # both
    (GRACE, GRACE, (None,), True),  # silent until the deadline: evicted then
    (GRACE, GRACE + 60, (3 * HOUR,), True),  # long past it
])
def test_a_victim_goes_once_it_answers_or_at_the_deadline(
        grace: float, told_ago: float, checkpointed: tuple[float | None, ...],
        goes: bool) -> None:
    victim = _victim(*checkpointed)
    going, told = due([victim], NOW - told_ago, grace, NOW)
    assert (going, told) == (((victim,), ()) if goes else ((), (victim,)))


def _scene(checkpointed: float | None = None) -> tuple[list[PodInfo], list[PodInfo]]:
    """Domain a full with scavenger gang `s`; a training gang needs all of it."""
    return running("s", ["a-n0", "a-n1"], checkpointed=checkpointed), gang(
        "train", 2, priority=TRAINING)


def test_a_fresh_preemption_tells_its_victims_and_evicts_nobody_yet() -> None:
    busy, train = _scene()
    (action,) = preempts(decide(tracked(cluster({"a": 2}), busy + train), {}, NOW,
                                state=TOLD))
    assert action.victims == ()
    assert {p.name for v in action.noticed for p in v.pods} == {"s-0", "s-1"}
    assert action.notice_until == NOW + GRACE
    events = {e.reason: e for e in events_of(action)}
    assert {p.name for p in events["PreemptionNotice"].pods} == {"s-0", "s-1"}
    assert "checkpointed-at" in events["PreemptionNotice"].message
    assert "told gang ml/s to checkpoint by" in events["Preempting"].message
    assert "Preempted" not in events


def _resumed(busy: list[PodInfo], at: float, now: float) -> list[object]:
    """The round at `now` for the training gang that preempted `busy` at `at`, with a rival
    that would take domain a if the room were not held."""
    record = victims_record("a", busy, ("a-n0", "a-n1"), at)
    rival = gang("rival", 1, priority=TRAINING * 2)
    return list(decide(tracked(cluster({"a": 2}), busy + preempting(2, record) + rival),
                       {}, now, state=TOLD))


def test_a_silent_victim_keeps_running_and_the_room_stays_held_until_the_deadline() -> None:
    busy, _ = _scene()
    # Past the reservation's own timeout (120 s), yet within the grace: still held.
    actions = _resumed(busy, NOW - 300, NOW)
    (mine,) = [a for a in actions if isinstance(a, Preempt)]
    assert mine.victims == ()
    assert len(mine.noticed) == 1
    assert "rival" not in admitted(actions)


def test_a_victim_that_answers_is_evicted_and_loses_only_what_came_after() -> None:
    busy, _ = _scene(checkpointed=2.0)  # saved 2 s ago; told 10 s ago
    (mine,) = [a for a in _resumed(busy, NOW - 10, NOW) if isinstance(a, Preempt)]
    assert {p.name for v in mine.victims for p in v.pods} == {"s-0", "s-1"}
    assert mine.noticed == ()
    assert mine.notice_until is None
    assert mine.gpu_hours == pytest.approx(2 * 8 * 2.0 / HOUR)


def test_a_silent_victim_is_evicted_at_the_deadline_with_all_it_did_lost() -> None:
    busy, _ = _scene()
    (mine,) = [a for a in _resumed(busy, NOW - GRACE, NOW) if isinstance(a, Preempt)]
    assert {p.name for v in mine.victims for p in v.pods} == {"s-0", "s-1"}
    assert mine.gpu_hours == pytest.approx(2 * 8 * HOUR / HOUR)


def test_the_deadline_a_pod_carries_is_read_back() -> None:
    raw = raw_member("s", 0, 8, 1)
    raw["metadata"]["annotations"][PREEMPTION_NOTICE_ANNOTATION] = "2026-11-29T06:00:00Z"
    assert PodInfo.parse(raw, SEAL).recorded.notice == 1795932000.0
    raw["metadata"]["annotations"][PREEMPTION_NOTICE_ANNOTATION] = "soon"
    assert PodInfo.parse(raw, SEAL).recorded.notice is None


def test_the_notice_condition_says_what_to_do() -> None:
    body = notice_condition("save your work", datetime.datetime(2026, 11, 29, tzinfo=datetime.UTC))
    (condition,) = body["status"]["conditions"]
    assert condition["type"] == PREEMPTION_NOTICE_CONDITION
    assert condition["status"] == "True"
    assert condition["message"] == "save your work"


def test_without_grace_nothing_changes() -> None:
    busy, train = _scene()
    (action,) = preempts(decide(tracked(cluster({"a": 2}), busy + train), {}, NOW))
    assert len(action.victims) == 1
    assert action.noticed == ()
    assert action.notice_until is None
    assert "PreemptionNotice" not in {e.reason for e in events_of(action)}
