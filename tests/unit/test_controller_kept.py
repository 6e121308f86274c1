"""What a round keeps instead of asking again, and what makes it ask again: the quota
answers of a ledger (until it is charged), a gang's counts (for all of its members, not
some), the reserved nodes a unit behind the head may not use (never the set the head's
claim fills later), a quota not asked of a unit that does not fit, a learned run time
(until one more is learned) and a shape (one object per shape). Each case would fail
were the answer kept past what changes it. And a shortcut that must answer as the long
way does: pods all alike packed by count."""

from __future__ import annotations

import random

import pytest

from tests.builders import (
    CLIQUE,
    NOW,
    cluster,
    gang,
    member,
    snapshot,
    tracked,
    with_marks,
)
from webhook.controller.core.actions import Wait
from webhook.controller.core.cluster.capacity import Room
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.gangs import Gang, gang_of
from webhook.controller.core.identities import UnitId
from webhook.controller.core.placement.backfill import Backfill
from webhook.controller.core.placement.fitting import NoFit, fit
from webhook.controller.core.placement.reservation import Reservation
from webhook.controller.core.placement.runtimes import Runtimes
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import Ledger, QueueSpec, Quotas

TEAMS = Quotas([QueueSpec("team-a", ("team-a",), nominal=16, borrowing_limit=0),
                QueueSpec("team-b", ("team-b",), nominal=16)])


def test_a_ledger_answers_again_once_it_is_charged() -> None:
    ledger = Ledger(TEAMS, {"team-a": 8}, 32)
    assert ledger.admissible("team-a", 8) is None
    assert ledger.admissible("team-a", 8) is None  # kept
    ledger.add("team-a", 8)
    # Kept past the charge, it would still say yes.
    assert ledger.admissible("team-a", 8) == \
        "queue team-a would use 24 GPUs: nominal 16, borrowing limit 0"
    ledger.add("team-a", -8)
    assert ledger.admissible("team-a", 8) is None


def test_a_ledger_keeps_answers_apart_by_pooling_and_asks_afresh_with_releases() -> None:
    ledger = Ledger(TEAMS, {"team-a": 16, "team-b": 16}, 32)
    # Beyond its nominal, team-b borrows: within its own limit, not from today's pool.
    assert ledger.admissible("team-b", 8, pooled=False) is None
    assert ledger.admissible("team-b", 8) is not None
    # What victims would release is asked afresh, never from (or into) what is kept.
    assert ledger.admissible("team-a", 8, {"team-a": 8}) is None
    assert ledger.admissible("team-a", 8) is not None


def test_a_gangs_counts_serve_all_of_it_and_never_some_of_it() -> None:
    pods = [member("g", 0, gpus=8, size=2), member("g", 1, gpus=8, size=2)]
    g = gang_of(UnitId.of_gang(pods[0].gang_id), pods)  # type: ignore[arg-type]
    snap = snapshot(cluster({"a": 1}))
    whole = fit(g.members, snap, CLIQUE, "required", gang=g)
    assert whole == fit(g.members, snap, CLIQUE, "required")
    assert isinstance(whole, NoFit)
    assert "needs 16 GPUs" in whole.reason
    # One of its pods fits: the gang's counts (16 GPUs) are not that pod's.
    assert not isinstance(fit(g.members[:1], snap, CLIQUE, "required", gang=g), NoFit)
    # A gang of a hundred-GPU pod is told why, by that pod, kept or not.
    big = [member("h", 0, gpus=100, size=1)]
    h = gang_of(UnitId.of_gang(big[0].gang_id), big)  # type: ignore[arg-type]
    never = fit(h.members, snap, CLIQUE, "required", gang=h)
    assert never == fit(h.members, snap, CLIQUE, "required")
    assert isinstance(never, NoFit)
    assert never.never
    assert "pod h-0" in never.reason


def test_a_gangs_stated_run_time_serves_all_of_it_and_never_some_of_it() -> None:
    pods = [with_marks(member("g", 0, size=2), runtime=600.0),
            with_marks(member("g", 1, size=2), runtime=60.0)]
    g = gang_of(UnitId.of_gang(pods[0].gang_id), pods)  # type: ignore[arg-type]
    backfill = Backfill(snapshot(cluster({"a": 1})), Runtimes(), lambda ns: ns, NOW)
    assert backfill.until(g.members, gang=g) == backfill.until(g.members) == NOW + 600
    # Its second pod alone states 60 s, not the gang's longest.
    assert backfill.until(g.members[1:], gang=g) == NOW + 60
    # A gang built again from changed members states what they state.
    changed = gang_of(g.id, [with_marks(p, runtime=30.0) for p in pods])
    assert backfill.until(changed.members, gang=changed) == NOW + 30


def test_room_kept_from_a_unit_is_never_the_set_a_later_head_fills() -> None:
    reservation = Reservation("strict")
    before, _ = reservation.off_limits(gang("early", 1))
    pods = gang("head", 2, gpus=8)
    head = gang_of(UnitId.of_gang(pods[0].gang_id), pods)  # type: ignore[arg-type]
    reservation.claim(head, NoFit("full", ("a-n0", "a-n1")))
    assert before == set()
    assert reservation.off_limits(gang("late", 1))[0] == {"a-n0", "a-n1"}


def test_a_unit_that_does_not_fit_waits_for_room_whatever_its_quota_says() -> None:
    # team-a holds its nominal and may not borrow: a gang that fits is over quota; one
    # that cannot fit anywhere waits for room (its quota is not asked).
    running = [member("r", i, gpus=8, size=2, ns="team-a", gated=False, node_name=f"a-n{i}")
               for i in range(2)]
    fits = gang("fits", 1, gpus=8, ns="team-a", created=1)
    too_big = gang("big", 3, gpus=8, ns="team-a", created=2)
    state = QueueState(TEAMS, PreemptionSettings(enabled=False))
    actions = decide(tracked(cluster({"a": 4}), running + fits + too_big), {}, NOW,
                     state=state)
    said = {a.unit.name: a.reason for a in actions if isinstance(a, Wait)}
    assert said == {"fits": "OverQuota", "big": "NoDomainFits"}


def test_a_learned_estimate_is_asked_again_once_a_run_is_learned() -> None:
    runtimes = Runtimes({("ml", ""): (100.0, 200.0, 300.0, 400.0, 500.0)})
    assert runtimes.estimate(("ml", "")) == 500.0
    assert runtimes.estimate(("ml", "")) == 500.0  # kept
    # Carried into the runtimes that learned one more, it would still say 500.
    assert runtimes.learned(("ml", ""), 900.0).estimate(("ml", "")) == 900.0
    assert runtimes.estimate(("ml", "")) == 500.0


def test_a_shape_is_one_object_while_a_gang_holds_it() -> None:
    def built(name: str, gpus: int) -> Gang:
        pods = gang(name, 3, gpus=gpus)
        return gang_of(UnitId.of_gang(pods[0].gang_id), pods)  # type: ignore[arg-type]

    first, alike, other = built("a", 8), built("b", 8), built("c", 4)
    assert first.shape is alike.shape
    assert other.shape is not first.shape
    assert other.shape != first.shape


def _first_fit(room: Room, sizes: list[int]) -> bool:
    """Pods placed one by one, each on the first node with room, most free first."""
    left = sorted((a for a, c in room.counts.items() for _ in range(c)), reverse=True)
    for size in sizes:
        at = next((i for i, free in enumerate(left) if free >= size), None)
        if at is None:
            return False
        left[at] -= size
    return True


@pytest.mark.parametrize("seed", range(40))
def test_pods_all_alike_pack_by_count_as_they_would_one_by_one(seed: int) -> None:
    rng = random.Random(seed)
    room = Room(rng.choice([0, 1, 2, 3, 4, 6, 8]) for _ in range(rng.randint(0, 12)))
    sizes = [rng.choice([1, 2, 3, 4, 8])] * rng.randint(1, 20)
    assert room.could_pack(sizes) == _first_fit(room, sizes)
