"""The predicted start of waiting units: a round played forward over the expected ends of
what runs, through the round's own stages (order, quotas, the head's reservation), and
"unknown, blocked by X" where an end cannot be known."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from tests.builders import (
    HOUR,
    NOW,
    TRAINING,
    cluster,
    gang,
    iso,
    label,
    running,
    tracked,
    unit,
    with_marks,
)
from webhook.controller.core.deciding import decided
from webhook.controller.core.forecasting import Prediction, forecast
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.placement.runtimes import Runtimes
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.queueing import QueueState
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.reporting import report
from webhook.controller.core.round import DecideOptions
from webhook.policy.model import Policy


def _runs(pods: list[PodInfo], seconds: float | None) -> list[PodInfo]:
    """`pods` stating an expected run time of `seconds` (None: stating none)."""
    return [with_marks(p, runtime=seconds) for p in pods]


def _ends_in(name: str, nodes: list[str], seconds: float | None, ns: str = "ml",
             ran: float = HOUR) -> list[PodInfo]:
    """A gang running on `nodes` for `ran` seconds, expected to end `seconds` from NOW
    (None: its end is unknown)."""
    return _runs(running(name, nodes, ns=ns, ran=ran), None if seconds is None
                 else ran + seconds)


@dataclass
class Case:
    nodes: list[NodeInfo]
    pods: list[PodInfo]
    # unit label -> (seconds after NOW, or None), the blocker's label or None
    expected: dict[str, tuple[float | None, str | None]]
    quotas: Quotas = field(default_factory=Quotas)
    runtimes: Runtimes = field(default_factory=Runtimes)


TWO = cluster({"d0": 2})
CASES: dict[str, Case] = {
    "room frees at the blocker's end": Case(
        TWO, [*_ends_in("a", ["d0-n0", "d0-n1"], 600), *gang("b", 2)],
        {"b": (600, None)}),
    "a blocker of unknown end: unknown, and it is named": Case(
        TWO, [*_ends_in("a", ["d0-n0", "d0-n1"], None), *gang("b", 2)],
        {"b": (None, "a")}),
    "of two blockers of unknown end, the one holding most of its room is named": Case(
        cluster({"d0": 2, "d1": 2}),
        [*_ends_in("small", ["d1-n0"], None), *_ends_in("wide", ["d0-n0", "d0-n1"], None),
         *_ends_in("soon", ["d1-n1"], 60), *gang("b", 2)],
        {"b": (None, "wide")}),
    "queue order: the second starts when the first is expected to end": Case(
        TWO, [*_ends_in("a", ["d0-n0", "d0-n1"], 600), *_runs(gang("b", 2), 1200),
              *_runs(gang("c", 2, created=1), 300)],
        {"b": (600, None), "c": (1800, None)}),
    "the first of unknown run time blocks the one behind it": Case(
        TWO, [*_ends_in("a", ["d0-n0", "d0-n1"], 600), *gang("b", 2),
              *gang("c", 2, created=1)],
        {"b": (600, None), "c": (None, "b")}),
    "two ends, each frees a node: the later decides": Case(
        TWO, [*_ends_in("a", ["d0-n0"], 300), *_ends_in("z", ["d0-n1"], 900),
              *gang("b", 2)],
        {"b": (900, None)}),
    "over quota with room free: it waits for its own queue's gang to end": Case(
        cluster({"d0": 2, "d1": 2}),
        [*_ends_in("a", ["d0-n0", "d0-n1"], 1500, ns="team-a"),
         *gang("b", 2, ns="team-a")],
        {"b": (1500, None)},
        Quotas([QueueSpec("team-a", ("team-a",), nominal=16, borrowing_limit=0)])),
    "no run time stated: the median its namespace learned, not the longest": Case(
        TWO, [*running("a", ["d0-n0", "d0-n1"], ran=60), *gang("b", 2)],
        {"b": (240, None)}, runtimes=Runtimes({("ml", ""): (100, 200, 300, 400, 1000)})),
    "past the learned median: the median of the runs that lasted longer": Case(
        TWO, [*running("a", ["d0-n0", "d0-n1"], ran=350), *gang("b", 2)],
        {"b": (350, None)}, runtimes=Runtimes({("ml", ""): (100, 200, 300, 400, 1000)})),
    "past every learned run: it runs as long again": Case(
        TWO, [*running("a", ["d0-n0", "d0-n1"], ran=2000), *gang("b", 2)],
        {"b": (2000, None)}, runtimes=Runtimes({("ml", ""): (100, 200, 300, 400, 1000)})),
    "past the time it states: as long again": Case(
        TWO, [*_runs(running("a", ["d0-n0", "d0-n1"], ran=1200), 1000), *gang("b", 2)],
        {"b": (1200, None)}),
    "past every share of it its kind took, short of what it states: until then": Case(
        TWO, [*_runs(running("a", ["d0-n0", "d0-n1"], ran=950), 1000), *gang("b", 2)],
        {"b": (50, None)}, runtimes=Runtimes(ratios={("ml", ""): (0.5, 0.6, 0.7, 0.8, 0.9)})),
    "a stated run time, before its namespace learned how runs keep to it: as stated": Case(
        TWO, [*_runs(running("a", ["d0-n0", "d0-n1"], ran=60), 1000), *gang("b", 2)],
        {"b": (940, None)}, runtimes=Runtimes(ratios={("ml", ""): (0.5, 0.6, 0.7, 0.8)})),
    "a stated run time, times the median share of it its namespace's runs took": Case(
        TWO, [*_runs(running("a", ["d0-n0", "d0-n1"], ran=60), 1000), *gang("b", 2)],
        {"b": (640, None)},
        runtimes=Runtimes(ratios={("ml", ""): (0.5, 0.6, 0.7, 0.8, 0.9)})),
    "past that share: the median of the runs that took more of what they stated": Case(
        TWO, [*_runs(running("a", ["d0-n0", "d0-n1"], ran=750), 1000), *gang("b", 2)],
        {"b": (100, None)},
        runtimes=Runtimes(ratios={("ml", ""): (0.5, 0.6, 0.7, 0.8, 0.9)})),
    "it preempts once ends leave room enough, though in no one domain": Case(
        # At 600 s a node is free in each domain; the scavengers beside them state no
        # end, started a minute ago (too soon to preempt at the round: the policy's
        # minimum run time), and the gang of higher priority evicts one of them then.
        cluster({"d0": 2, "d1": 2}),
        [*running("a0", ["d0-n0"], ran=60), *_ends_in("x", ["d0-n1"], 600),
         *_ends_in("y", ["d1-n0"], 600), *running("a1", ["d1-n1"], ran=60),
         *gang("b", 2, priority=TRAINING)],
        {"b": (600, None)}),
    "nothing learned in its namespace and class: the median of its namespace's runs": Case(
        TWO, [*running("a", ["d0-n0", "d0-n1"], ran=60), *gang("b", 2)],
        {"b": (240, None)},
        runtimes=Runtimes({("ml", "training"): (100, 200), ("ml", "scavenger"): (300, 400, 1000)})),
    "nothing learned in its namespace: unknown, though another namespace learned": Case(
        TWO, [*running("a", ["d0-n0", "d0-n1"], ran=60), *gang("b", 2)],
        {"b": (None, "a")}, runtimes=Runtimes({("other", ""): (100, 200, 300, 400, 1000)})),
    "a run still going counts as one lasting at least that long": Case(
        # Of 100-500 the median is 300; `long` has run 5,000 s so far: 350.
        cluster({"d0": 2, "d1": 1}),
        [*running("a", ["d0-n0", "d0-n1"], ran=60), *running("long", ["d1-n0"], ran=5000),
         *gang("b", 2)],
        {"b": (290, None)}, runtimes=Runtimes({("ml", ""): (100, 200, 300, 400, 500)})),
    "behind a head whose room the forecast filled, a short unit backfills": Case(
        # `x` is admitted now onto the head's room; once `a` ends, the head `h` still
        # waits for `x` (600 s), and `y` (200 s) ends before that.
        cluster({"d0": 3}),
        [*_ends_in("a", ["d0-n2"], 100), *_runs(gang("x", 1), 600),
         *gang("h", 3, created=1), *_runs(gang("y", 1, created=2), 200)],
        {"h": (600, None), "y": (100, None)}),
    "room pods being deleted hold frees in their grace period, not played forward": Case(
        TWO, [*(dataclasses.replace(p, deleting=True) for p in running("a", ["d0-n0"])),
              *_ends_in("z", ["d0-n1"], 600), *gang("b", 1)],
        {"b": (0, None)}),
    "ends within seconds of each other are one step": Case(
        TWO, [*_ends_in("a", ["d0-n0"], 600), *_ends_in("z", ["d0-n1"], 605),
              *gang("b", 2)],
        {"b": (605, None)}),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_predicted_start(case: Case) -> None:
    actions, r = decided(tracked(case.nodes, case.pods), {}, NOW,
                         state=QueueState(quotas=case.quotas, runtimes=case.runtimes))
    found = forecast(r, actions)
    said = {label(u): (None if p.at is None else p.at - NOW,
                       None if p.blocker is None else label(p.blocker))
            for u, p in found.items()}
    assert said == case.expected


def test_the_round_is_left_as_it_was() -> None:
    pods = [*_ends_in("a", ["d0-n0", "d0-n1"], 600), *_runs(gang("b", 2), 60)]
    actions, r = decided(tracked(TWO, pods), {}, NOW)
    before = dict(r.snap.free_gpu), dict(r.queues.ledger.used)
    assert forecast(r, actions) == {unit("b"): Prediction(NOW + 600)}
    assert (dict(r.snap.free_gpu), dict(r.queues.ledger.used)) == before


@pytest.mark.parametrize(("resolution", "start"), [(15.0, 12.0), (1.0, 5.0), (0.0, 5.0)])
def test_ends_closer_than_the_resolution_are_one_step(resolution: float, start: float
                                                      ) -> None:
    # `b` needs one node: `a`'s end 5 s on frees it, `z`'s 12 s on another; a step takes
    # the ends within the controller's --forecast-resolution of its first, and is at its last.
    pods = [*_ends_in("a", ["d0-n0"], 5), *_ends_in("z", ["d0-n1"], 12), *gang("b", 1)]
    options = DecideOptions(forecast_resolution=resolution)
    actions, r = decided(tracked(TWO, pods), {}, NOW, options)
    assert forecast(r, actions) == {unit("b"): Prediction(NOW + start)}


def test_steps_run_out_then_unknown_with_no_blocker() -> None:
    pods = [*_ends_in("a", ["d0-n0", "d0-n1"], 600), *gang("b", 2)]
    actions, r = decided(tracked(TWO, pods), {}, NOW)
    assert {label(u): p for u, p in forecast(r, actions, steps=0).items()} == \
        {"b": Prediction(None)}


STATUS: dict[str, tuple[float | None, tuple[str | None, str | None], str]] = {
    # the running gang's end (None: unknown) -> (predictedStart, predictionBlocker),
    # what the STARTS column says
    "known": (600, (iso(NOW + 600), None), f"starts {iso(NOW + 600)}"),
    "unknown": (None, (None, "ml/a"), "starts unknown (ml/a has no known end)"),
}


@pytest.mark.parametrize(("end", "keys", "column"), STATUS.values(), ids=STATUS.keys())
def test_status_shows_the_prediction(policy: Policy, end: float | None,
                                     keys: tuple[str | None, str | None],
                                     column: str) -> None:
    pods = [*_ends_in("a", ["d0-n0", "d0-n1"], end), *gang("b", 2)]
    found = report(policy, tracked(TWO, pods, policy.counted()), [], NOW, {})
    line = found.as_json()["waiting"][0]
    assert (line["gang"], line["predictedStart"], line["predictionBlocker"]) == ("ml/b", *keys)
    assert "ml/b  queue default, priority 0, 2 pods, 16 GPUs: " in found.text()
    assert found.text().split("ml/b  ")[1].split("\n")[0].endswith(f"; {column}")
