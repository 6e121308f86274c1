"""Predicted starts in the controller: the last round played forward (`forecasting`) at a
bounded cadence, told where people look.

- Right after a round (the forecast reads the tracked cluster as that round saw it), at
  most every `EVERY` seconds, or `SOON` when a gang waits that no forecast has seen: a
  forecast costs many rounds' worth at thousands of waiting gangs (docs/benchmarks.md),
  so it is not made every round.
- A gang whose prediction moved by more than `MARGIN` (or between known and unknown)
  since it was last told: the annotation `gpu-airlock.io/predicted-start` on its waiting
  pods, and a `PredictedStart` event on its anchor. At most `WRITES` pods a forecast:
  the rest are told at the next one.
- When a gang is admitted: how far its first known prediction was from now, in the
  histogram `airlock_prediction_error_seconds`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Final, Protocol

from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.actions import Action, Admit, Event, Wait, rfc3339
from webhook.controller.core.forecasting import Prediction
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.leading import NotLeading
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.controller.shells.patches import annotation_patch
from webhook.keys import PREDICTED_START_ANNOTATION
from webhook.patchops import PatchOp

log = logging.getLogger("airlock.controller")

# Seconds between forecasts at most; at least, when a gang waits that none has seen.
EVERY: Final = 30.0
SOON: Final = 5.0
# A prediction that moved less than this is not told again.
MARGIN: Final = 120.0
# Pods annotated per forecast at most: the gates' writes come first.
WRITES: Final = 100


class Writer(Protocol):
    """What predictions are written through: the applier."""

    async def annotate(self, pod: PodInfo, ops: list[PatchOp]) -> None: ...

    def tell(self, events: Iterable[Event]) -> None: ...


def annotation_value(p: Prediction) -> str:
    """What the annotation says: the time, or `unknown` and who makes it so."""
    if p.at is not None:
        return rfc3339(p.at)
    return "unknown" if p.blocker is None else f"unknown; blocked by {p.blocker.path}"


def moved(told: Prediction | None, now: Prediction) -> bool:
    """Whether `now` is worth telling after `told`."""
    if told is None or (told.at is None) != (now.at is None):
        return True
    if told.at is None or now.at is None:
        return told.blocker != now.blocker
    return abs(told.at - now.at) > MARGIN


class Predicting:
    def __init__(self, applier: Writer, metrics: ControllerMetrics) -> None:
        self.applier = applier
        self.metrics = metrics
        self.at = float("-inf")
        # What each waiting gang was last told, and its first known prediction.
        self.told: dict[UnitId, Prediction] = {}
        self.first: dict[UnitId, float] = {}
        # The gangs waiting at the last forecast.
        self.seen: set[UnitId] = set()

    def forecast(self, rounds: Rounds, actions: Sequence[Action], now: float
                 ) -> list[tuple[UnitId, Prediction, tuple[PodInfo, ...]]]:
        """After a round: the error of each admitted gang's prediction observed; when a
        forecast is due, what to tell (gang, prediction, its waiting pods)."""
        for action in actions:
            if isinstance(action, Admit):
                self.told.pop(action.unit, None)
                first = self.first.pop(action.unit, None)
                if first is not None:
                    self.metrics.prediction_error.observe(abs(now - first))
        waits = {a.unit: a.pods for a in actions if isinstance(a, Wait)}
        fresh = not waits.keys() <= self.seen
        if now - self.at < (SOON if fresh else EVERY):
            return []
        self.at = now
        self.seen = set(waits)
        started = time.perf_counter()
        found = rounds.predict()
        self.metrics.forecast_seconds.observe(time.perf_counter() - started)
        self.told = {u: p for u, p in self.told.items() if u in waits}
        self.first = {u: at for u, at in self.first.items() if u in waits}
        tell = []
        for unit, p in found.items():
            if p.at is not None:
                self.first.setdefault(unit, p.at)
            if moved(self.told.get(unit), p) and unit in waits:
                tell.append((unit, p, waits[unit]))
        return tell

    async def tell(self, tell: Sequence[tuple[UnitId, Prediction, tuple[PodInfo, ...]]]
                   ) -> None:
        """The annotation on each gang's waiting pods, and an event on its first: the
        gangs first in the list first, up to `WRITES` pods, side by side (the applier
        bounds the writes in flight)."""
        budget, chosen = WRITES, []
        for unit, p, pods in tell:
            if budget < len(pods):
                break
            budget -= len(pods)
            chosen.append((unit, p, pods))
        await asyncio.gather(*(self._one(*c) for c in chosen))

    async def _one(self, unit: UnitId, p: Prediction, pods: tuple[PodInfo, ...]) -> None:
        value = annotation_value(p)
        try:
            await asyncio.gather(*(self.applier.annotate(pod, annotation_patch(
                pod, PREDICTED_START_ANNOTATION, value)) for pod in pods))
        except NotLeading:
            return
        except ApiException as e:
            log.debug("prediction not written", extra={"gang": str(unit), "status": e.status})
            return
        self.told[unit] = p
        anchor = min(pods, key=lambda x: x.name)
        self.applier.tell([Event((anchor,), "Normal", "PredictedStart",
                                 f"expected to start {value}" if p.at is not None
                                 else f"start {value}")])
