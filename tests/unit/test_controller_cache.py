"""The cache knows which gang members still wait behind Airlock's gate, so a round in a
busy cluster with nothing gated costs nothing."""

from __future__ import annotations

from tests.builders import POLICY_DEFAULT, SEAL, raw_member
from webhook.controller.core.identities import PodKey
from webhook.controller.shells.cache import Cache
from webhook.keys import GANG_EXPECTED_SIZE_ANNOTATION

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


def test_a_pod_it_cannot_read_is_kept_as_such_and_the_rest_are_listed() -> None:
    """Whatever a pod carries is its author's: one the controller cannot read (here a
    creation time that is no time) is kept by name as unreadable, holding the room it
    requests on its node, and the listing of everyone else goes on."""
    cache = Cache(POLICY_DEFAULT, SEAL)
    broken = raw_member("g", 0, gated=False, node_name="n1")
    broken["metadata"]["creationTimestamp"] = "not a time"
    cache.list_pods([cache.parse_pod(broken), cache.parse_pod(raw_member("h", 0))])
    kept = cache.pods[KEY]
    assert kept.invalid is not None
    assert kept.invalid.startswith("the pod cannot be read")
    assert kept.node_name == "n1"
    assert kept.requests["nvidia.com/gpu"] == 8
    assert cache.gated == {PodKey("ml", "h-0")}
    assert cache.unreadable == 1
    cache.pod_event("DELETED", broken)
    assert KEY not in cache.pods


def test_a_mark_of_five_thousand_digits_sets_the_pod_aside_without_raising() -> None:
    """int() raises past 4,300 digits: read unbounded, one such pod stopped the watch."""
    raw = raw_member("g", 0, marks={GANG_EXPECTED_SIZE_ANNOTATION: "9" * 5000})
    cache = Cache(POLICY_DEFAULT, SEAL)
    cache.list_pods([cache.parse_pod(raw)])
    invalid = cache.pods[KEY].invalid
    assert invalid is not None
    assert GANG_EXPECTED_SIZE_ANNOTATION in invalid
    assert "(5000 characters)" in invalid
    assert cache.unreadable == 0
