"""The controller's predictions as written: the annotation on a waiting gang's pods and an
event when the prediction moves past the margin, at most one forecast per cadence (and
at most one under way, off the round: the round never waits for it), and the error of
the first known prediction observed when the gang is admitted."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable

import pytest

from tests.builders import HOUR, NOW, cluster, gang, iso, running, tracked, with_marks
from webhook.controller.core.actions import Action, Event
from webhook.controller.core.forecasting import Prediction
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.rounds import Rounds
from webhook.controller.shells.forking import Done, Failed
from webhook.controller.shells.metrics import ControllerMetrics
from webhook.controller.shells.predicting import (
    EVERY,
    MARGIN,
    WRITES,
    Found,
    Predicting,
    annotation_value,
    moved,
)
from webhook.keys import PREDICTED_START_ANNOTATION
from webhook.patchops import PatchOp
from webhook.policy.model import Policy

BLOCKER = UnitId("gang", "ml", "a")
VALUES = [
    (Prediction(NOW), iso(NOW)),
    (Prediction(None, BLOCKER), "unknown; blocked by ml/a"),
    (Prediction(None), "unknown"),
]


@pytest.mark.parametrize(("prediction", "value"), VALUES)
def test_the_annotation_says_when_or_who_blocks(prediction: Prediction, value: str) -> None:
    assert annotation_value(prediction) == value


MOVES = [
    (None, Prediction(NOW), True),
    (Prediction(NOW), Prediction(NOW + MARGIN), False),
    (Prediction(NOW), Prediction(NOW + MARGIN + 1), True),
    (Prediction(NOW), Prediction(None, BLOCKER), True),
    (Prediction(None, BLOCKER), Prediction(None, BLOCKER), False),
    (Prediction(None, BLOCKER), Prediction(None), True),
]


@pytest.mark.parametrize(("told", "now", "tell"), MOVES)
def test_told_again_past_the_margin(told: Prediction | None, now: Prediction,
                                    tell: bool) -> None:
    assert moved(told, now) is tell


class Written:
    def __init__(self) -> None:
        self.patches: list[tuple[str, list[PatchOp]]] = []
        self.events: list[Event] = []

    async def annotate(self, pod: PodInfo, ops: list[PatchOp]) -> None:
        self.patches.append((pod.name, ops))

    def tell(self, events: Iterable[Event]) -> None:
        self.events.extend(events)


def _blocked(end: float, gangs: int = 1) -> list[PodInfo]:
    """A gang running on both nodes of d0 until `end` seconds from NOW, and `gangs` of two
    8-GPU pods waiting."""
    pods = [with_marks(p, runtime=HOUR + end) for p in running("a", ["d0-n0", "d0-n1"])]
    return pods + [p for g in range(gangs) for p in gang(f"b{g}", 2, created=g % 60)]


def test_the_prediction_is_written_once_then_its_error_observed(policy: Policy) -> None:
    nodes = cluster({"d0": 2})
    rounds, written, metrics = Rounds(), Written(), ControllerMetrics()
    # The controller's own offload: each forecast in a forked child.
    predicting = Predicting(written, metrics)

    def round_at(at: float, pods: list[PodInfo]) -> None:
        actions = rounds.run(policy, tracked(nodes, pods, policy.counted()), at)
        asyncio.run(_after(predicting, rounds, actions, at))

    round_at(NOW, _blocked(600))
    value = iso(NOW + 600)
    assert written.patches == [
        (f"b0-{i}", [{"op": "add", "path": "/metadata/annotations/gpu-airlock.io~1predicted-start",
                      "value": value}]) for i in range(2)]
    assert [(e.reason, e.message, [p.name for p in e.pods]) for e in written.events] == [
        ("PredictedStart", f"expected to start {value}", ["b0-0"])]
    # Within the cadence no forecast; past it, the same prediction is not told again.
    round_at(NOW + 1, _blocked(599))
    round_at(NOW + EVERY, _blocked(600 - EVERY))
    assert (len(written.patches), len(written.events)) == (2, 1)
    # Admitted 50 s after its predicted start: that error is observed.
    round_at(NOW + 650, [p for p in _blocked(0) if p.marks.gang != "a"])
    error = metrics.registry.get_sample_value
    assert error("airlock_prediction_error_seconds_count") == 1
    assert error("airlock_prediction_error_seconds_sum") == 50
    assert PREDICTED_START_ANNOTATION in written.patches[0][1][0]["path"].replace("~1", "/")


async def _after(predicting: Predicting, rounds: Rounds, actions: list[Action],
                 at: float) -> None:
    """A round's forecast, when one is due, and what it tells."""
    task = predicting.after(rounds, actions, at)
    if task is not None:
        await task


async def _inline(work: Callable[[], Found]) -> Done[Found] | Failed:
    return Done(work(), 0.0)


def test_a_forecast_writes_a_bounded_number_of_pods(policy: Policy) -> None:
    rounds, written = Rounds(), Written()
    predicting = Predicting(written, ControllerMetrics(), _inline)
    gangs = WRITES  # two pods each: twice what one forecast may write
    actions = rounds.run(policy, tracked(cluster({"d0": 2}), _blocked(600, gangs),
                                         policy.counted()), NOW)
    asyncio.run(_after(predicting, rounds, actions, NOW))
    assert len(written.patches) == WRITES
    # The rest are told at the next forecast.
    actions = rounds.run(policy, tracked(cluster({"d0": 2}), _blocked(600 - EVERY, gangs),
                                         policy.counted()), NOW + EVERY)
    asyncio.run(_after(predicting, rounds, actions, NOW + EVERY))
    assert len({name for name, _ in written.patches}) == 2 * gangs


def test_the_round_never_waits_for_its_forecast(policy: Policy) -> None:
    """The round only starts the forecast: what it finds is told when it ends, and no
    other is started meanwhile, however long it takes."""
    rounds, written = Rounds(), Written()
    started: list[Callable[[], Found]] = []

    async def rounds_while_forecasting() -> None:
        answer: asyncio.Future[Done[Found] | Failed] = \
            asyncio.get_running_loop().create_future()

        def held(work: Callable[[], Found]) -> Awaitable[Done[Found] | Failed]:
            started.append(work)
            return answer

        predicting = Predicting(written, ControllerMetrics(), held)
        for step in range(3):
            at = NOW + step * EVERY
            actions = rounds.run(policy, tracked(cluster({"d0": 2}), _blocked(600 - step * EVERY),
                                                 policy.counted()), at)
            predicting.after(rounds, actions, at)
            await asyncio.sleep(0)
        assert (len(started), written.patches) == (1, [])
        answer.set_result(Done(started[0](), 0.0))
        assert predicting.running is not None
        await predicting.running

    asyncio.run(rounds_while_forecasting())
    assert [name for name, _ in written.patches] == ["b0-0", "b0-1"]
