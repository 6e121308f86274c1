"""What the leader remembers between rounds: fair share sampled and charged, evictions
backing off, PodDisruptionBudgets turned into budgets, the policy's settings converted."""

from __future__ import annotations

import pytest

from tests.builders import HOUR, NOW, member, running, single, tracked, unit
from webhook.accelerators import Accelerators
from webhook.controller.core.actions import Preempt, Victim
from webhook.controller.core.configuring import preemption_of, quotas_of
from webhook.controller.core.deciding import Admit, Record
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.budgets import Pdb, budgets_of
from webhook.controller.core.queues.accounting import (
    FAIR_SHARE_KEY,
    RUNTIMES_KEY,
    SHORT_SINCE_KEY,
    Accounts,
)
from webhook.controller.core.records import PreemptionRecord
from webhook.policy.model import Policy
from webhook.policy.queues import FairShareSpec, PreemptionSpec, Queue

GPUS = Accelerators.of(["nvidia.com/gpu", "amd.com/gpu"])


@pytest.fixture
def teams(policy: Policy) -> Policy:
    return policy.model_copy(update={
        "queues": (Queue(name="team-a", namespaces=("team-a",),
                         nominal={"nvidia.com/gpu": 8, "amd.com/gpu": 8},
                         borrowing_limit={"nvidia.com/gpu": 4}),),
        "fair_share": FairShareSpec(half_life="1h", entry_charge="10m"),
        "preemption": PreemptionSpec(min_runtime="1m", delay="10s", requeue_backoff="1m")})


def test_policy_settings_in_the_cores_units(teams: Policy) -> None:
    quotas = quotas_of(teams, GPUS)
    team = quotas.spec("team-a")
    assert (team.nominal, team.borrowing_limit, team.lending_limit) == (16, 4, None)
    assert quotas.spec("default").nominal == 0
    settings = preemption_of(teams)
    assert (settings.min_runtime, settings.delay, settings.requeue_backoff) == (60, 10, 60)
    # No class states `preempts` or a delay of its own.
    assert settings.preempts_by_priority_class == settings.delay_by_priority_class == ()
    inference = teams.classes["inference"]
    stated = teams.model_copy(update={"classes": {**teams.classes, "inference": (
        inference.model_copy(update={"preempts": False, "preemption_delay": "2m"}))}})
    assert preemption_of(stated).preempts_by_priority_class == (
        (inference.priority_class.name, False),)
    assert preemption_of(stated).delay_by_priority_class == (
        (inference.priority_class.name, 120.0),)


def test_no_preemption_before_the_budgets_are_listed(teams: Policy) -> None:
    accounts = Accounts()
    assert not accounts.state(teams, tracked([], []), NOW).preemption.enabled
    accounts.list_pdbs([])
    assert accounts.state(teams, tracked([], []), NOW).preemption.enabled


def test_fair_share_is_sampled_and_charged(teams: Policy) -> None:
    accounts = Accounts()
    pods = running("g", ["n0"], ns="team-a")
    accounts.sample(teams, tracked([], pods), NOW)
    (_, team) = accounts.sample(teams, tracked([], pods), NOW + HOUR)
    assert (team.name, team.used, team.borrowed) == ("team-a", 8, 0)
    # Eight GPUs for one half-life: 8 x 1h / ln 2 x 1/2.
    assert team.share == pytest.approx(8 * HOUR / 0.6931471805599453 / 2)
    admit = Admit(unit("new", "team-a"), Record(None, None, ("new-0",), NOW), pods[0], (pods[0],),
                  4)
    accounts.record(teams, GPUS, [admit], NOW + HOUR)
    assert accounts.fair_share is not None
    assert accounts.fair_share.usage["team-a"] == pytest.approx(team.share + 4 * 600)


def test_evicted_gangs_back_off_then_are_forgotten(teams: Policy) -> None:
    accounts = Accounts()
    victim = running("v", ["n0"])
    preempt = Preempt(unit("x"), victim[0], PreemptionRecord(None, None, (), (), NOW),
                      (victim[0],), (Victim(tuple(victim), unit("v"), "default", 0, 8, 0, 0),),
                      1, "default")
    accounts.record(teams, GPUS, [preempt], NOW)
    assert accounts.state(teams, tracked([], []), NOW + 30).evicted == {unit("v"): NOW}
    assert accounts.state(teams, tracked([], []), NOW + 61).evicted == {}


def test_budgets_cover_the_pods_their_selector_picks() -> None:
    web = single("web", "n0")
    train = running("t", ["n1", "n2"])
    pdbs = [
        Pdb("ml", "by-gang", {"matchLabels": {"gpu-airlock.io/gang-id": "t"}}, 1),
        Pdb("ml", "by-expression", {"matchExpressions": [
            {"key": "gpu-airlock.io/gang-id", "operator": "DoesNotExist"}]}, 0),
        Pdb("ml", "null-selects-nothing", None, 0),
        Pdb("other", "other-namespace", {}, 0),
    ]
    budgets = {b.name: (b.allowed, {k[1] for k in b.pods})
               for b in budgets_of(pdbs, tracked([], [web, *train]))}
    assert budgets == {"ml/by-gang": (1, {"t-0", "t-1"}), "ml/by-expression": (0, {"web"})}


def test_pdb_events_update_the_budgets() -> None:
    accounts = Accounts()
    raw = {"metadata": {"namespace": "ml", "name": "p"}, "spec": {"selector": {}},
           "status": {"disruptionsAllowed": 2}}
    accounts.pdb_event("ADDED", raw)
    assert accounts.pdbs[("ml", "p")].allowed == 2
    accounts.pdb_event("DELETED", raw)
    assert accounts.pdbs == {}


def _short_gang(admitted_at: float = NOW - HOUR) -> list[PodInfo]:
    """Gang `g`, admitted as 3 pods at `admitted_at`, with 2 left."""
    whole = running("g", ["n0", "n1"])
    record = Record(None, None, ("g-0", "g-1", "g-2"), admitted_at, 3)
    anchor = member("g", 0, 8, 3, gated=False, node_name="n0", placement=record)
    return [anchor, whole[1]]


def test_short_gangs_are_timed_from_when_first_seen(teams: Policy) -> None:
    accounts = Accounts()
    pods = _short_gang()
    assert accounts.state(teams, tracked([], pods), NOW).short_since == {unit("g"): NOW}
    assert accounts.state(teams, tracked([], pods),
                          NOW + 60).short_since == {unit("g"): NOW}
    back = [*pods, member("g", 9, 8, 3, gated=False, node_name="n2")]
    accounts.remembered()
    assert accounts.state(teams, tracked([], back), NOW + 120).short_since == {}
    assert not accounts.newly_short  # remembered at the next sample: nothing to hurry


def test_a_new_leader_carries_on_the_time_a_gang_became_short(teams: Policy) -> None:
    former = Accounts()
    pods = _short_gang()
    former.state(teams, tracked([], pods), NOW)
    assert former.newly_short
    memory = former.memory()
    assert former.newly_short  # until the leader says it stored the memory
    former.remembered()
    assert not former.newly_short
    assert set(memory) == {FAIR_SHARE_KEY, SHORT_SINCE_KEY, RUNTIMES_KEY}
    leader = Accounts()
    leader.carry_on(teams, memory, NOW + 300)
    assert leader.state(teams, tracked([], pods), NOW + 300).short_since == {unit("g"): NOW}
    assert not leader.newly_short
    # Without what the former leader remembered, the grace period starts again.
    afresh = Accounts()
    afresh.carry_on(teams, {}, NOW + 300)
    assert afresh.state(teams, tracked([], pods),
                        NOW + 300).short_since == {unit("g"): NOW + 300}
    garbled = Accounts()
    garbled.carry_on(teams, {SHORT_SINCE_KEY: "not json"}, NOW + 300)
    assert garbled.state(teams, tracked([], pods),
                         NOW + 300).short_since == {unit("g"): NOW + 300}


def test_a_kept_time_of_an_earlier_shortfall_does_not_count(teams: Policy) -> None:
    # Kept when the gang first fell short; members rejoined since (a later record), and
    # it is short again: a new shortfall, timed from now, not from the old one.
    former = Accounts()
    former.state(teams, tracked([], _short_gang(admitted_at=NOW - HOUR)), NOW - 600)
    leader = Accounts()
    leader.carry_on(teams, former.memory(), NOW)
    rejoined = _short_gang(admitted_at=NOW - 60)
    assert leader.state(teams, tracked([], rejoined), NOW).short_since == {unit("g"): NOW}
    assert leader.newly_short


def test_a_short_gang_is_noticed_at_each_sample_without_rounds(teams: Policy) -> None:
    # Nothing gated, so no round runs: the sample notices, and the rounds start.
    accounts = Accounts()
    accounts.sample(teams, tracked([], _short_gang()), NOW)
    assert accounts.short_since.keys() == {unit("g")}
    assert accounts.newly_short
