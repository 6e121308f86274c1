"""The cache knows which gang members still wait behind Airlock's gate, so a round in a
busy cluster with nothing gated costs nothing."""

from __future__ import annotations

from tests.builders import POLICY_DEFAULT, SEAL, raw_member
from webhook.controller.core.identities import PodKey
from webhook.controller.shells.cache import Cache

KEY = PodKey("ml", "g-0")


def test_gated_members_are_tracked_through_list_updates_and_deletes() -> None:
    cache = Cache(POLICY_DEFAULT, SEAL)
    cache.list_pods([cache.parse_pod(raw_member("g", 0)),
                     cache.parse_pod(raw_member("h", 0, gated=False, node_name="n1"))])
    assert cache.gated == {KEY}
    cache.pod_event("MODIFIED", raw_member("g", 0, gated=False))
    assert cache.gated == set()
    cache.pod_event("MODIFIED", raw_member("g", 0))
    assert cache.gated == {KEY}
    cache.pod_event("DELETED", raw_member("g", 0))
    assert cache.gated == set()
    assert KEY not in cache.pods


def test_a_pod_being_deleted_or_outside_any_gang_does_not_count() -> None:
    cache = Cache(POLICY_DEFAULT, SEAL)
    leaving = raw_member("g", 0)
    leaving["metadata"]["deletionTimestamp"] = "2026-11-22T10:00:00Z"
    loose = raw_member("g", 1)
    loose["metadata"]["labels"] = {}
    cache.list_pods([cache.parse_pod(leaving), cache.parse_pod(loose)])
    assert cache.gated == set()


def test_a_late_event_does_not_roll_back_a_newer_write() -> None:
    cache = Cache(POLICY_DEFAULT, SEAL)
    newer = raw_member("g", 0, gated=False)
    newer["metadata"]["resourceVersion"] = "20"
    older = raw_member("g", 0)
    older["metadata"]["resourceVersion"] = "10"
    cache.stored(newer)
    cache.pod_event("MODIFIED", older)
    assert cache.gated == set()
    assert not cache.pods[KEY].gated
