"""`bench.preemption --predictions`: the forecast after each round (`forecasting`: every
waiting gang's predicted start), timed two ways on the same cluster, CPU time:

1. in the process, after each round, as the controller did before 2026-11-29: the
   round and its forecast apart, and both (how long the event loop was held);
2. as the controller does now (`shells.forking`, `shells.predicting`): rounds back to
   back on an event loop, each starting a forecast in a child forked after it when none
   is under way. Each turn of the loop is timed whole (its round, and the fork or the
   reading of a forecast's answer that fell in it): the parent's CPU, the child's not.
   Beside it, the forecasts' own CPU in their children.
"""

from __future__ import annotations

import asyncio
import functools
import statistics
import time
from collections.abc import Callable

from bench.common import pct
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.deciding import QueueState, decided
from webhook.controller.core.forecasting import STEPS, forecast
from webhook.controller.shells.forking import Done, Failed, in_child
from webhook.controller.shells.predicting import LIMIT, Found

Churn = Callable[[], None]


def _ms(values: list[float]) -> str:
    return f"p50 {statistics.median(values) * 1000:.1f} ms, p99 {pct(values, 0.99) * 1000:.1f} ms"


def in_process(cluster: Tracked, state: QueueState, now: float, rounds: int,
               churn: Churn) -> None:
    """Rounds, each followed by its forecast in the same process: the two timed apart."""
    decided_s, forecast_s, known, total = [], [], 0, 0
    for _ in range(rounds):
        churn()
        started = time.process_time()
        actions, r = decided(cluster, {}, now, state=state)
        decided_s.append(time.process_time() - started)
        started = time.process_time()
        found = forecast(r, actions)
        forecast_s.append(time.process_time() - started)
        known, total = sum(1 for p in found.values() if p.at is not None), len(found)
    both = [a + b for a, b in zip(decided_s, forecast_s, strict=True)]
    print(f"with predictions, in the process: the round {_ms(decided_s)}; its forecast "
          f"{_ms(forecast_s)}; both p99 {pct(both, 0.99) * 1000:.1f} ms ({known:,} of "
          f"{total:,} waiting units with a known start, at most {STEPS} steps)")


async def _forked(cluster: Tracked, state: QueueState, now: float, rounds: int,
                  churn: Churn) -> tuple[list[float], list[float], list[float]]:
    turns, forks, children = [], [], []
    under_way: asyncio.Task[Done[Found] | Failed] | None = None
    for _ in range(rounds):
        churn()
        started = time.process_time()
        actions, r = decided(cluster, {}, now, state=state)
        if under_way is None or under_way.done():
            if under_way is not None and isinstance(answer := under_way.result(), Done):
                children.append(answer.seconds)
            forking = time.process_time()
            under_way = in_child(functools.partial(forecast, r, actions), LIMIT)
            forks.append(time.process_time() - forking)
        # One pass of the loop: the answer of a forecast is read in the turn it arrives.
        await asyncio.sleep(0)
        turns.append(time.process_time() - started)
    if under_way is not None and isinstance(answer := await under_way, Done):
        children.append(answer.seconds)
    return turns, forks, children


def forked(cluster: Tracked, state: QueueState, now: float, rounds: int,
           churn: Churn) -> None:
    """Rounds on an event loop, the forecasts in forked children beside them."""
    turns, forks, children = asyncio.run(_forked(cluster, state, now, rounds, churn))
    print(f"with predictions, forked: a turn of the loop (its round, and a forecast's "
          f"fork or answer) {_ms(turns)}, max {max(turns) * 1000:.1f} ms; a fork "
          f"{_ms(forks)} ({len(forks)} forecasts started); a forecast in its child "
          f"{_ms(children) if children else '-'} ({len(children)} ended)")
