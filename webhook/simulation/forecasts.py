"""`airlock simulate --predictions`: each gang's predicted start beside its real one.

After a round that leaves a gang waiting with no known prediction yet, the round is
played forward (`forecasting`, as the controller does): at once for a gang never
forecast, else at most every `EVERY` simulated seconds. A gang keeps its first known
prediction, and whether its very first was unknown (no end known of what blocked it).

The figures are over the gangs that waited more than `LONG` (a wait of seconds needs no
prediction): the median absolute error, the median error as a share of the wait, and
the share within ±25% of the wait or ±60 s, whichever is wider."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from typing import Any, Final

from webhook.controller.core.actions import Action, Wait
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.rounds import Rounds
from webhook.simulation.timelines import Timeline

EVERY: Final = 30.0
LONG: Final = 300.0
# Within: this share of the wait, or `NEAR` seconds when that is more.
SHARE: Final = 0.25
NEAR: Final = 60.0


class Forecasts:
    def __init__(self) -> None:
        self.at = float("-inf")
        self.asked: set[UnitId] = set()

    def seen(self, rounds: Rounds, actions: Sequence[Action], now: float,
             timeline_of: Callable[[PodInfo], Timeline]) -> None:
        """After the round of `actions` at `now`: the forecast, when one is due."""
        lacking = [(a.unit, timeline_of(a.pods[0])) for a in actions
                   if isinstance(a, Wait) and a.pods]
        lacking = [(u, t) for u, t in lacking if t.predicted is None]
        if not lacking or (now - self.at < EVERY
                           and all(u in self.asked for u, _ in lacking)):
            return
        self.at = now
        found = rounds.predict()
        for unit, timeline in lacking:
            said = found.get(unit)
            if said is None:
                continue
            if said.at is None:
                timeline.unknown_first = timeline.unknown_first or unit not in self.asked
            else:
                timeline.predicted = said.at
            self.asked.add(unit)


def accuracy(timelines: Sequence[Timeline]) -> dict[str, Any]:
    """The predictions' figures over the gangs that waited more than `LONG`."""
    waited = [t for t in timelines if t.started is not None and t.started - t.submit > LONG]
    known = [(abs(t.started - t.predicted), t.started - t.submit) for t in waited
             if t.started is not None and t.predicted is not None]
    errors = [e for e, _ in known]
    return {
        "waitedLong": len(waited),
        "predicted": len(known),
        "unknownFirst": sum(1 for t in waited if t.unknown_first),
        "medianErrorSeconds": round(statistics.median(errors), 1) if errors else None,
        "medianErrorShareOfWait": round(statistics.median(e / w for e, w in known), 3)
        if known else None,
        "withinShare": round(sum(1 for e, w in known if e <= max(SHARE * w, NEAR))
                             / len(known), 3) if known else None,
    }
