"""Whether the controller still sees the cluster and, while it leads, still decides: what
`/healthz` answers. Pure: the clock comes in; the watches and the decision loop report
here, and the server asks for the problems."""

from __future__ import annotations

import time
from collections.abc import Callable

# A watch reports each successful list and each watch stream that ran to its end. The
# apiserver ends a healthy stream at the watch's timeout (300 s, `watching.watch`), so a
# healthy watch reports at least every 300 s plus a reconnect, and a failing one retries
# within 30 s of backoff and reports as soon as a list succeeds. Twice the timeout is
# never reached by a healthy watch, even one that lost a stream and listed again; a watch
# silent that long hangs on a dead connection or has failed for ten minutes, and the
# controller decides from a view it cannot trust.
WATCH_STALE_SECONDS = 600.0
# The decision loop completes a loop at least every 2 s (`running.PERIOD`) plus a round
# and the rest after it, and a round takes well under a second at 50,000 pods
# (docs/benchmarks.md); a new leader's first loop also waits for the first list of every
# pod, tens of seconds in a large cluster on a loaded apiserver. Three minutes is far
# beyond all of that. A leader stuck longer (a write that never returns) still renews
# its Lease, so no other replica can take over while gangs wait: failing the liveness
# probe restarts it and hands the Lease on.
LOOP_STALE_SECONDS = 180.0
# A round that raises is retried at the next loop; one bad moment (an apiserver write
# refused mid-round) passes. Rounds failing for a minute on end fail the same way every
# time: the process is restarted, with a fresh cache and the next replica's view, rather
# than left to decide nothing while its probe says all is well.
ROUNDS_FAILING_SECONDS = 60.0


class Health:
    def __init__(self, clock: Callable[[], float] = time.monotonic,
                 watch_stale: float = WATCH_STALE_SECONDS,
                 loop_stale: float = LOOP_STALE_SECONDS,
                 rounds_failing: float = ROUNDS_FAILING_SECONDS) -> None:
        self.clock = clock
        self.watch_stale, self.loop_stale = watch_stale, loop_stale
        self.rounds_failing = rounds_failing
        self._watches: dict[str, float] = {}
        # Since the last loop completed, or leading began; None while following.
        self._looped: float | None = None
        # Since when rounds have failed, each one since, and the last failure's text.
        self._failing: float | None = None
        self.failures = 0
        self._last_failure = ""

    def watching(self, kind: str) -> Callable[[], None]:
        """A watch of `kind` starts now; it calls what this returns on each success."""
        self._watches[kind] = self.clock()

        def alive() -> None:
            self._watches[kind] = self.clock()

        return alive

    def leading(self) -> None:
        """This replica leads from now on: its decision loop is watched too."""
        self._looped = self.clock()

    def looped(self) -> None:
        self._looped = self.clock()
        self._failing = None

    def round_failed(self, error: str) -> None:
        """A round raised: the loop goes on, but it has decided nothing."""
        self._looped = self._looped if self._looped is not None else self.clock()
        if self._failing is None:
            self._failing = self.clock()
        self.failures += 1
        self._last_failure = error

    def problems(self) -> list[str]:
        """Why the controller is unhealthy; empty when it is healthy."""
        now = self.clock()
        problems = [f"{kind} watch: no successful list or watch for {now - seen:.0f} s "
                    f"(limit {self.watch_stale:.0f} s)"
                    for kind, seen in sorted(self._watches.items())
                    if now - seen > self.watch_stale]
        if self._looped is not None and now - self._looped > self.loop_stale:
            problems.append(f"leading, but no decision loop completed for "
                            f"{now - self._looped:.0f} s (limit {self.loop_stale:.0f} s)")
        if self._failing is not None and now - self._failing > self.rounds_failing:
            problems.append(f"every round has failed for {now - self._failing:.0f} s (limit "
                            f"{self.rounds_failing:.0f} s), the last with: "
                            f"{self._last_failure}")
        return problems
