"""Predicted starts in the controller: the last round played forward (`forecasting`) at a
bounded cadence, told where people look.

- Started right after a round, in a child forked then (`forking`): it reads the tracked
  cluster as that round saw it, and the event loop goes on with rounds, watches and
  /healthz while it runs. At most one at a time, at most every `EVERY` seconds, or `SOON`
  when a gang waits that no forecast has seen: a forecast costs many rounds' worth of CPU
  at thousands of waiting gangs (docs/benchmarks.md).
- When the forecast ends, a gang still waiting at the last round whose prediction moved
  by more than `MARGIN` (or between known and unknown) since it was last told: the
  annotation `gpu-airlock.io/predicted-start` on its waiting pods, and a
  `PredictedStart` event on its anchor. At most `WRITES` pods a forecast: the rest are
  told at the next one.
- When a gang is admitted: how far its first known prediction was from now, in the
  histogram `airlock_prediction_error_seconds`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Final, Protocol

from kubernetes_asyncio.client.exceptions import ApiException

from webhook.controller.core.actions import Action, Admit, Event, Wait, rfc3339
from webhook.controller.core.forecasting import Prediction
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.forking import Done, Failed, in_child
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
# A forecast's child is killed past this (one costs about 2 s of CPU at 5,000 waiting
# gangs on 5,000 nodes): the next is started at the next cadence.
LIMIT: Final = 120.0


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


Found = dict[UnitId, Prediction]
# Starts `work` (the forecast) off the event loop, on the state as it is when called.
Offload = Callable[[Callable[[], Found]], Awaitable["Done[Found] | Failed"]]


def forked(work: Callable[[], Found]) -> Awaitable[Done[Found] | Failed]:
    """The forecast in a child forked now (`forking`: why a fork), bounded by `LIMIT`."""
    return in_child(work, LIMIT)


class Predicting:
    def __init__(self, applier: Writer, metrics: ControllerMetrics,
                 offload: Offload = forked) -> None:
        self.applier = applier
        self.metrics = metrics
        self.offload = offload
        self.at = float("-inf")
        # What each waiting gang was last told, and its first known prediction.
        self.told: dict[UnitId, Prediction] = {}
        self.first: dict[UnitId, float] = {}
        # The gangs waiting at the last forecast; those at the last round, and their pods.
        self.seen: set[UnitId] = set()
        self.waiting: dict[UnitId, tuple[PodInfo, ...]] = {}
        # The forecast under way (at most one): it tells what it found when it ends.
        self.running: asyncio.Task[None] | None = None

    def after(self, rounds: Rounds, actions: Sequence[Action], now: float
              ) -> asyncio.Task[None] | None:
        """After a round, before anything awaits (the forecast starts on the cluster as
        that round saw it): the error of each admitted gang's prediction observed; when
        a forecast is due and none is under way, it is started off the loop, and the task
        that tells what it finds is returned."""
        for action in actions:
            if isinstance(action, Admit):
                self.told.pop(action.unit, None)
                first = self.first.pop(action.unit, None)
                if first is not None:
                    self.metrics.prediction_error.observe(abs(now - first))
        self.waiting = {a.unit: a.pods for a in actions if isinstance(a, Wait)}
        fresh = not self.waiting.keys() <= self.seen
        if (self.running is not None and not self.running.done()) or \
                now - self.at < (SOON if fresh else EVERY):
            return None
        self.at = now
        self.seen = set(self.waiting)
        self.running = asyncio.get_running_loop().create_task(
            self._tell_when_found(self.offload(rounds.predict)))
        return self.running

    async def _tell_when_found(self, pending: Awaitable[Done[Found] | Failed]) -> None:
        answer = await pending
        if isinstance(answer, Failed):
            log.warning("no forecast", extra={"why": answer.why})
            return
        self.metrics.forecast_seconds.observe(answer.seconds)
        await self.tell(self.found(answer.value))

    def found(self, found: Found) -> list[tuple[UnitId, Prediction, tuple[PodInfo, ...]]]:
        """What to tell of a forecast (gang, prediction, its waiting pods): the gangs
        still waiting at the last round whose prediction moved."""
        waits = self.waiting
        self.told = {u: p for u, p in self.told.items() if u in waits}
        self.first = {u: at for u, at in self.first.items() if u in waits}
        tell = []
        for unit, p in found.items():
            if unit not in waits:
                continue
            if p.at is not None:
                self.first.setdefault(unit, p.at)
            if moved(self.told.get(unit), p):
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
