"""What the controller's /healthz reports, with the clock passed in: stale watches, and a
stuck decision loop while leading, and nothing on a healthy controller."""

from __future__ import annotations

import pytest

from tests.builders import Clock
from webhook.controller.core.health import (
    LOOP_STALE_SECONDS,
    ROUNDS_FAILING_SECONDS,
    WATCH_STALE_SECONDS,
    Health,
)


@pytest.fixture
def clock() -> Clock:
    return Clock(1000.0)


def test_a_healthy_controller_has_no_problems(clock: Clock) -> None:
    """Watches that report at each stream's end (every 300 s) and a loop every 2 s: an
    hour of it never trips either threshold."""
    health = Health(clock)
    watches = {kind: health.watching(kind) for kind in ("pods", "nodes")}
    health.leading()
    for second in range(3600):
        clock.now += 1
        if second % 300 == 299:
            for alive in watches.values():
                alive()
        if second % 2 == 0:
            health.looped()
        assert health.problems() == []


def test_a_watch_silent_too_long_is_named(clock: Clock) -> None:
    health = Health(clock)
    pods, nodes = health.watching("pods"), health.watching("nodes")
    clock.now += WATCH_STALE_SECONDS
    assert health.problems() == []
    nodes()
    clock.now += 1
    assert health.problems() == [
        f"pods watch: no successful list or watch for {WATCH_STALE_SECONDS + 1:.0f} s "
        f"(limit {WATCH_STALE_SECONDS:.0f} s)"]
    pods()
    assert health.problems() == []


def test_a_watch_that_never_lists_goes_stale_from_its_start(clock: Clock) -> None:
    health = Health(clock)
    clock.now += 10 * WATCH_STALE_SECONDS  # before the watch starts: not counted
    health.watching("poddisruptionbudgets")
    clock.now += WATCH_STALE_SECONDS + 1
    (problem,) = health.problems()
    assert problem.startswith("poddisruptionbudgets watch: ")


def test_the_loop_counts_only_while_leading(clock: Clock) -> None:
    health = Health(clock)
    clock.now += 10 * LOOP_STALE_SECONDS  # a follower never loops
    assert health.problems() == []
    health.leading()
    clock.now += LOOP_STALE_SECONDS
    assert health.problems() == []
    clock.now += 1
    assert health.problems() == [
        f"leading, but no decision loop completed for {LOOP_STALE_SECONDS + 1:.0f} s "
        f"(limit {LOOP_STALE_SECONDS:.0f} s)"]
    health.looped()
    assert health.problems() == []


def test_every_problem_is_reported_at_once(clock: Clock) -> None:
    health = Health(clock, watch_stale=10, loop_stale=5)
    health.watching("pods")
    health.watching("nodes")
    health.leading()
    clock.now += 11
    nodes, pods, loop = health.problems()
    assert nodes.startswith("nodes watch: ")
    assert pods.startswith("pods watch: ")
    assert loop == "leading, but no decision loop completed for 11 s (limit 5 s)"


def test_rounds_failing_for_a_minute_fail_the_probe_and_one_success_clears_it(
        clock: Clock) -> None:
    """A round that raises every time decides nothing: the probe says so, with the error,
    instead of staying green while every gang waits."""
    health = Health(clock)
    health.leading()
    error = "OverflowError: int too large to convert to float"
    for _ in range(int(ROUNDS_FAILING_SECONDS) // 2 + 1):
        health.round_failed(error)
        assert health.problems() == []
        clock.now += 2
    health.round_failed(error)
    assert health.problems() == [
        f"every round has failed for {ROUNDS_FAILING_SECONDS + 2:.0f} s (limit "
        f"{ROUNDS_FAILING_SECONDS:.0f} s), the last with: {error}"]
    health.looped()
    assert health.problems() == []
