"""The records codec: the controller opens only what it sealed, on the pod it sealed it
to, and records from before sealing only on pods older than its key."""

from __future__ import annotations

import json

import pytest

from tests.builders import CLIQUE, NOW, SEAL
from webhook.controller.core.records import (
    FUTURE_SKEW,
    PreemptionRecord,
    Record,
    Seal,
    Untrusted,
    peek,
)

PLACED = Record("clique-1", CLIQUE, ("g-0", "g-1"), NOW - 5, 2)
PREEMPTED = PreemptionRecord("clique-1", CLIQUE, ("prod/vllm-0",),
                             ("n1",), NOW - 5, ("uid-vllm-0",))
OTHER_KEY = Seal(b"someone-elses-key-of-32-bytes!!!", 0.0, lambda: NOW)


@pytest.mark.parametrize("record", [PLACED, PREEMPTED])
def test_a_sealed_record_opens_on_its_own_pod_only(record: Record | PreemptionRecord) -> None:
    text = SEAL.dumps(record, "uid-anchor")
    assert SEAL.loads(record.kind, text, "uid-anchor", NOW - 60) == record
    copied = SEAL.loads(record.kind, text, "uid-other", NOW - 60)
    assert isinstance(copied, Untrusted)
    assert "did not write it here" in copied.reason


def _edited(text: str, **changes: object) -> str:
    raw = json.loads(text)
    raw.update(changes)
    return json.dumps(raw)


@pytest.mark.parametrize(("kind", "text"), [
    ("preemption", _edited(SEAL.dumps(PREEMPTED, "u"), victims=["prod/db-0"])),
    ("preemption", _edited(SEAL.dumps(PREEMPTED, "u"), mac="0" * 64)),
    ("preemption", _edited(SEAL.dumps(PREEMPTED, "u"), v=2)),
    ("placement", SEAL.dumps(PREEMPTED, "u")),  # a preemption passed off as a placement
    ("preemption", OTHER_KEY.dumps(PREEMPTED, "u")),
])
def test_an_edited_or_foreign_record_does_not_open(kind: str, text: str) -> None:
    opened = SEAL.loads(kind, text, "u", NOW - 60)  # type: ignore[arg-type]
    assert isinstance(opened, Untrusted)


def test_a_record_from_before_sealing_opens_only_on_a_pod_older_than_the_key() -> None:
    legacy = json.dumps(PREEMPTED.body())
    upgraded = Seal(b"airlock-unit-tests-record-key-32", NOW - 10, lambda: NOW)
    assert upgraded.loads("preemption", legacy, "u", NOW - 3600) == PREEMPTED
    newer = upgraded.loads("preemption", legacy, "u", NOW - 5)
    assert isinstance(newer, Untrusted)
    assert "no seal" in newer.reason


@pytest.mark.parametrize(("text", "why"), [
    ("{not json", "malformed"),
    ("[1, 2]", "malformed"),
    (json.dumps({"victims": ["prod/vllm-0"], "nodes": [], "at": NOW}), "uid"),
])
def test_garbage_and_victims_without_uids_do_not_open(text: str, why: str) -> None:
    upgraded = Seal(b"airlock-unit-tests-record-key-32", NOW, lambda: NOW)
    opened = upgraded.loads("preemption", text, "u", NOW - 3600)
    assert isinstance(opened, Untrusted)
    assert why in opened.reason


def test_a_record_from_the_future_does_not_open() -> None:
    ahead = PreemptionRecord(None, None, ("prod/vllm-0",), (), NOW + FUTURE_SKEW + 1,
                             ("uid-vllm-0",))
    opened = SEAL.loads("preemption", SEAL.dumps(ahead, "u"), "u", NOW - 60)
    assert isinstance(opened, Untrusted)
    assert "future" in opened.reason
    near = PreemptionRecord(None, None, ("prod/vllm-0",), (), NOW + 5, ("uid-vllm-0",))
    assert SEAL.loads("preemption", SEAL.dumps(near, "u"), "u", NOW - 60) == near


def test_observers_read_records_without_the_key() -> None:
    assert peek("placement", SEAL.dumps(PLACED, "u")) == PLACED
    assert peek("preemption", json.dumps(PREEMPTED.body())) == PREEMPTED
    assert peek("placement", "{not json") is None


def test_a_short_key_is_refused() -> None:
    with pytest.raises(ValueError, match="16 bytes"):
        Seal(b"short", 0.0, lambda: NOW)


def test_what_the_leader_keeps_is_versioned_and_read_back_from_before_versions() -> None:
    from webhook.controller.core.identities import UnitId
    from webhook.controller.core.queues import fairshare, shortfalls

    fair = fairshare.FairShare(3600.0, 60.0, NOW, {"team-a": 7200.0})
    kept = json.loads(fair.dumps())
    assert (kept["v"], kept["kind"]) == (1, "fairShare")
    fresh = fairshare.FairShare(3600.0, 60.0, 0.0)
    assert fresh.carried_on(fair.dumps()) == fair
    # As a leader before versions wrote it.
    assert fresh.carried_on(json.dumps({"at": NOW, "usage": {"team-a": 7200.0}})) == fair
    # Kept by a newer version: not guessed at.
    assert fresh.carried_on(json.dumps({**kept, "v": 2})) == fresh
    short = {UnitId("gang", "ml", "g"): shortfalls.Shortfall(NOW - 60, NOW - 3600)}
    assert shortfalls.loads(shortfalls.dumps(short)) == short
    legacy = json.dumps({"ml/g": {"since": NOW - 60, "record": NOW - 3600}})
    assert shortfalls.loads(legacy) == short
