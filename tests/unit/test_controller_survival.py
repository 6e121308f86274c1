"""How long runs of one kind last, the runs still going counted (Kaplan-Meier): what a
forecast expects of a unit that states no run time."""

from __future__ import annotations

import statistics

import pytest

from tests.builders import gang
from webhook.controller.core.placement.runtimes import Runtimes
from webhook.controller.core.placement.survival import median_beyond, survival

RUNS = (100.0, 200.0, 300.0, 400.0, 1000.0, 1500.0)


@pytest.mark.parametrize("ran", [0.0, 150.0, 300.0, 999.0])
def test_with_nothing_still_going_the_median_of_the_runs_that_lasted_longer(ran: float) -> None:
    assert median_beyond(survival(RUNS, ()), ran) == \
        statistics.median(r for r in RUNS if r > ran)


def test_past_every_run_it_is_expected_to_end_now() -> None:
    assert median_beyond(survival(RUNS, ()), 2000.0) == 2000.0


def test_a_run_still_going_moves_the_median_later() -> None:
    # Six ended, two going for 5,000 s: half of the eight ended only at 400 (exactly
    # half: between 400 and 1,000).
    assert median_beyond(survival(RUNS, (5000.0, 5000.0)), 0.0) == 700.0


def test_runs_going_for_less_than_it_ran_tell_nothing_of_it() -> None:
    assert median_beyond(survival(RUNS, (50.0, 120.0)), 150.0) == \
        median_beyond(survival(RUNS, ()), 150.0)


def test_past_every_end_with_longer_runs_going_at_least_the_longest() -> None:
    assert median_beyond(survival(RUNS, (9000.0,)), 2000.0) == 9000.0


def test_a_forecast_counts_its_namespaces_runs_still_going() -> None:
    pods = gang("g", 2)
    learned = Runtimes({("ml", ""): RUNS})
    assert learned.typical(pods) == 350.0
    assert learned.running({("ml", ""): (5000.0, 5000.0)}).typical(pods) == 700.0
    # What is still going is a forecast's: nothing of it is kept, nor promised.
    assert learned.running({("ml", ""): (5000.0,)}).dumps() == learned.dumps()
    assert learned.running({("ml", ""): (5000.0,)}).estimate(("ml", "")) == 1500.0


def test_before_its_class_learned_the_median_of_its_namespace() -> None:
    pods = gang("g", 2)
    assert Runtimes({("ml", "a"): RUNS[:3], ("ml", "b"): RUNS[3:]}).typical(pods) == 350.0
    assert Runtimes({("ml", "a"): RUNS[:4]}).typical(pods) is None
    assert Runtimes({("other", ""): RUNS}).typical(pods) is None
