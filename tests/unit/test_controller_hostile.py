"""Whatever a pod carries is its author's word, and one tenant's pod must never fail the
round of every other team: a unit that carries what Airlock cannot follow, or whose
decision raises, is set aside as `Invalid` and the round goes on."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import (
    NOW,
    SEAL,
    admitted,
    cluster,
    gang,
    member,
    node,
    pod,
    raw_member,
    running,
    tracked,
    waits,
)
from webhook.controller.core import stages
from webhook.controller.core.actions import Admit, Wait
from webhook.controller.core.deciding import DecideOptions, QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.queues.quotas import QueueSpec, Quotas
from webhook.controller.core.records import Record
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    QUEUED_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    SLICE_EXPECTED_SIZE_ANNOTATION,
)

HUGE = "9" * 400


@pytest.mark.parametrize("key", [GANG_EXPECTED_SIZE_ANNOTATION, GANG_EXPECTED_MIN_ANNOTATION,
                                 RUNTIME_SECONDS_ANNOTATION, SLICE_EXPECTED_SIZE_ANNOTATION])
@pytest.mark.parametrize("value", [HUGE, "9" * 5000, "-1", "1e9", "²"])
def test_a_mark_out_of_bounds_sets_its_gang_aside_and_the_next_gang_is_admitted(
        key: str, value: str) -> None:
    hostile = [member("mallory", 0, gpus=1, size=1, ns="mallory", marks={key: value})]
    actions = decide(tracked(cluster({"a": 2}), [*hostile, *gang("canary", 2, created=5)]),
                     {}, NOW)
    assert admitted(actions) == {"canary": "a"}
    (wait,) = [a for a in actions if isinstance(a, Wait)]
    assert wait.reason == "Invalid"
    assert wait.warning
    assert key in wait.detail


def test_a_unit_whose_decision_raises_is_set_aside_and_the_round_goes_on(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A fault nobody foresaw, in one unit's fit: that unit's alone."""
    real = stages.fit  # type: ignore[attr-defined]

    def fit(members, *args, **kwargs):  # type: ignore[no-untyped-def]
        if members[0].marks.gang == "mallory":
            raise OverflowError("int too large to convert to float")
        return real(members, *args, **kwargs)

    monkeypatch.setattr(stages, "fit", fit)
    actions = decide(tracked(cluster({"a": 2, "b": 2}), [
        *gang("mallory", 2, ns="mallory"), *gang("canary", 2, created=5)]), {}, NOW)
    assert set(admitted(actions)) == {"canary"}
    assert waits(actions)["mallory"].startswith(
        "Invalid: deciding it failed (OverflowError: int too large to convert to float)")


# --- quota cannot be bypassed ------------------------------------------------------------

# One queue for namespace mallory: 2 GPUs guaranteed, 2 more it may borrow.
SMALL_QUOTA = QueueState(Quotas([QueueSpec("mallory", ("mallory",), nominal=2,
                                           borrowing_limit=2)]),
                         preemption=PreemptionSettings(enabled=False))
MINIMUM_ONE = {GANG_EXPECTED_MIN_ANNOTATION: "1"}


def _elastic(i: int, **kw: Any) -> PodInfo:
    return member("e", i, gpus=1, size=64, ns="mallory", mode="preferred", marks=MINIMUM_ONE,
                  **kw)


def test_an_elastic_gang_grows_only_within_its_queues_quota() -> None:
    """`gang-min-size: 1`, `gang-size: 64`: admitted with what the quota allows, and its
    joiners are charged like the rest, never past the borrowing limit."""
    first = decide(tracked(cluster({"a": 8}), [_elastic(i) for i in range(16)]), {}, NOW,
                   state=SMALL_QUOTA)
    (admit,) = [a for a in first if isinstance(a, Admit)]
    assert len(admit.ungate) == 4
    record = Record(None, None, tuple(p.name for p in admit.ungate), NOW, 64, minimum=1)
    running_four = [_elastic(i, gated=False, node_name=f"a-n{i}",
                             placement=record if i == 0 else None) for i in range(4)]
    later = decide(tracked(cluster({"a": 8}), [*running_four,
                                               *(_elastic(i) for i in range(4, 16))]),
                   {}, NOW + 60, state=SMALL_QUOTA)
    assert not [a for a in later if isinstance(a, Admit)]


def test_a_gang_started_by_a_pod_with_a_node_name_is_charged_for_the_rest() -> None:
    """A pod placed by `nodeName` was never gated: it makes its gang look started, and
    before, the rest joined with no quota check at all."""
    placed = member("g", 0, gpus=2, size=4, ns="mallory", mode="preferred", gated=False,
                    node_name="a-n0")
    rest = [member("g", i, gpus=2, size=4, ns="mallory", mode="preferred") for i in range(1, 4)]
    actions = decide(tracked(cluster({"a": 4}), [placed, *rest]), {}, NOW, state=SMALL_QUOTA)
    assert not [a for a in actions if isinstance(a, Admit)]
    assert waits(actions)["g"].startswith("Waiting: 3 pods to rejoin a gang of 4")
    assert [a.reason for a in actions if isinstance(a, Wait)] == ["OverQuota"]


def test_a_replacement_restores_a_running_gang_whatever_its_queue_uses_now() -> None:
    """What a gang was admitted with is its own: a member lost and made again is not
    charged twice, even where its queue has since used its quota up."""
    record = Record(None, None, ("g-0", "g-1"), NOW - 60, 2)
    bound = member("g", 0, gpus=2, size=2, ns="mallory", mode="preferred", gated=False,
                   node_name="a-n0", placement=record)
    other = running("other", ["a-n1"], gpus=2, ns="mallory")
    again = member("g", 1, gpus=2, size=2, ns="mallory", mode="preferred", created=9,
                   name="g-9")
    actions = decide(tracked(cluster({"a": 4}), [bound, *other, again]), {}, NOW,
                     state=SMALL_QUOTA)
    assert [p.name for a in actions if isinstance(a, Admit) for p in a.ungate] == ["g-9"]


# --- what can never fit keeps no room ---------------------------------------------------

@pytest.mark.parametrize(("hostile", "says"), [
    ({"cpu": "100000"}, "requests more than any eligible node offers: cpu 100000000"),
    ({"memory": "64Ti"}, "memory 70368744177664 (the most any has:"),
    # The nodes report none: the scheduler's NodeResourcesFit counts that as 0.
    ({"ephemeral-storage": "1Gi"}, "ephemeral-storage 1073741824 (the most any has: 0)"),
    ({"nodeSelector": {"example.com/nowhere": "true"}}, "no node is eligible"),
])
def test_a_gang_that_can_never_fit_for_any_reason_keeps_no_room_from_the_next(
        hostile: dict[str, Any], says: str) -> None:
    """Judged on GPUs alone, a gang asking for 100,000 CPUs headed its queue and kept its
    domain for ever; under the strict order it stopped every gang behind it."""
    spec = {k: v for k, v in hostile.items() if k == "nodeSelector"}
    asks = {k: v for k, v in hostile.items() if k != "nodeSelector"}
    b = raw_member("mallory", 0, 8, 1, ns="mallory", **spec)
    if asks:
        b["spec"]["containers"][0]["resources"]["requests"].update(asks)
    actions = decide(tracked(cluster({"a": 2}), [PodInfo.parse(b, SEAL),
                                                 *gang("canary", 2, created=5)]),
                     {}, NOW, DecideOptions(order="strict"))
    assert admitted(actions) == {"canary": "a"}
    (wait,) = [a for a in actions if isinstance(a, Wait)]
    assert wait.reason == "NeverFits"
    assert wait.reserves is None
    assert says in wait.detail


# --- marks on pods the webhook never sees move nothing of another team's ---------------

FPGA = "example.com/fpga"


@pytest.mark.parametrize("marks", [{GANG_LABEL: "x"}, {QUEUED_ANNOTATION: "true"}])
def test_an_accelerator_recorded_on_a_pod_that_requests_none_counts_for_nobody(
        marks: dict[str, str]) -> None:
    """A busybox pod requests no accelerator, so the webhook never sees it and whatever it
    carries stays: recording another team's device (here FPGAs, which the policy does not
    count) made the controller count that device as GPUs everywhere, and the team's
    running FPGA pod pushed its gang over its GPU quota."""
    fpgas = pod("fpga-0", "team").gpus(8, FPGA).set("nodeName", "f-0").build()
    fpgas["status"] = {"phase": "Running"}
    forger = pod("busybox", "mallory").annotation(ACCELERATORS_ANNOTATION, FPGA)
    for key, value in marks.items():
        (forger.label if key == GANG_LABEL else forger.annotation)(key, value)
    nodes = [*cluster({"a": 1}), node("f-0", None, resource=FPGA)]
    state = QueueState(Quotas([QueueSpec("team", ("team",), nominal=8, borrowing_limit=0)]),
                       preemption=PreemptionSettings(enabled=False))
    actions = decide(tracked(nodes, [PodInfo.parse(fpgas, SEAL),
                                     PodInfo.parse(forger.build(), SEAL),
                                     *gang("train", 1, ns="team", mode="preferred")]),
                     {}, NOW, state=state)
    assert admitted(actions) == {"train": "a"}
