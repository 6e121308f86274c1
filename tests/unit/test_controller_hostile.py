"""Whatever a pod carries is its author's word, and one tenant's pod must never fail the
round of every other team: a unit that carries what Airlock cannot follow, or whose
decision raises, is set aside as `Invalid` and the round goes on."""

from __future__ import annotations

import pytest

from tests.builders import NOW, admitted, cluster, gang, member, tracked, waits
from webhook.controller.core import deciding
from webhook.controller.core.actions import Wait
from webhook.controller.core.deciding import decide
from webhook.keys import (
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
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
    real = deciding.fit  # type: ignore[attr-defined]

    def fit(members, *args, **kwargs):  # type: ignore[no-untyped-def]
        if members[0].gang == "mallory":
            raise OverflowError("int too large to convert to float")
        return real(members, *args, **kwargs)

    monkeypatch.setattr(deciding, "fit", fit)
    actions = decide(tracked(cluster({"a": 2, "b": 2}), [
        *gang("mallory", 2, ns="mallory"), *gang("canary", 2, created=5)]), {}, NOW)
    assert set(admitted(actions)) == {"canary"}
    assert waits(actions)["mallory"].startswith(
        "Invalid: deciding it failed (OverflowError: int too large to convert to float)")
