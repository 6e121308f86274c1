"""Examples of a hypothesis strategy in volume, seeded: what both fuzzes send."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as seeded
from hypothesis import strategies as st

T = TypeVar("T")
# Examples one hypothesis run draws: a run remembers every example it made (not to make
# one twice), so 100,000 are drawn in batches, each a run of its own with its own seed.
BATCH = 1_000


def _batch(strategy: st.SearchStrategy[T], want: int, seed: int,
           sink: Callable[[T], None]) -> int:
    """One hypothesis run of up to `want` examples; how many it gave."""
    got = 0

    @seeded(seed)
    @settings(max_examples=want, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet)
    @given(strategy)
    def run(example: T) -> None:
        nonlocal got
        if got < want:
            got += 1
            sink(example)

    run()
    return got


def drawn(strategy: st.SearchStrategy[T], count: int, seed: int, sink: Callable[[T], None],
          stopped: Callable[[], bool] = lambda: False) -> None:
    """Hands `sink` `count` examples of `strategy` as hypothesis's engine draws them (its
    mutations of earlier examples included) from `seed`: the same seed, the same
    examples. `.example()` would not do: it is neither seeded nor meant for volume."""
    made, batch = 0, 0
    while made < count and not stopped():
        made += _batch(strategy, min(BATCH, count - made), seed * 1_000_003 + batch, sink)
        batch += 1
