"""Room made where a gang prefers to run: for a `preferred` topology, preemption also
prices freeing one domain of that level, and takes it unless it costs more than the
policy's premium over the cheapest victims anywhere, or a higher priority."""

from __future__ import annotations

import pytest

from tests.builders import (
    HOUR,
    NOW,
    SCAVENGER,
    TRAINING,
    cluster,
    gang,
    preempts,
    running,
    tracked,
)
from webhook.controller.core.actions import events_of
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings


def _full(older: float = 2.0, priority_b1: int = SCAVENGER) -> list[PodInfo]:
    """Domains a and b of two nodes, each node full with one scavenger: the youngest
    (cheapest) on a-n0 and b-n0, so the cheapest pair spreads over both domains."""
    return [*running("a0", ["a-n0"], ran=HOUR), *running("b0", ["b-n0"], ran=HOUR),
            *running("a1", ["a-n1"], ran=older * HOUR),
            *running("b1", ["b-n1"], ran=3 * HOUR, priority=priority_b1)]


def _preempt(busy: list[PodInfo], premium: float, mode: str = "preferred") -> tuple[
        str | None, set[str], str]:
    state = QueueState(preemption=PreemptionSettings(preferred_premium=premium))
    train = gang("train", 2, priority=TRAINING, mode=mode)
    (action,) = preempts(decide(tracked(cluster({"a": 2, "b": 2}), busy + train), {}, NOW,
                                state=state))
    (told,) = [e.message for e in events_of(action) if e.reason == "Preempting"]
    return action.record.domain, {p.name for v in action.victims for p in v.pods}, told


@pytest.mark.parametrize(("older", "premium", "domain", "victims"), [
    # Domain a loses 8 + 16 GPU-hours against 8 + 8 spread: 1.5 times, within 1.5.
    (2.0, 1.5, "a", {"a0-0", "a1-0"}),
    # The same at a premium of 1.2: spread.
    (2.0, 1.2, None, {"a0-0", "b0-0"}),
    # a-n1 ran longer: domain a now costs 8 + 24 = 2 times: spread at 1.5, a at 2.
    (3.0, 1.5, None, {"a0-0", "b0-0"}),
    (3.0, 2.0, "a", {"a0-0", "a1-0"}),
])
def test_the_preferred_domain_is_freed_within_the_premium(
        older: float, premium: float, domain: str | None, victims: set[str]) -> None:
    found, evicted, told = _preempt(_full(older), premium)
    assert (found, evicted) == (domain, victims)
    # Its event says which it chose, and the figures it weighed.
    assert "GPU-hours lost in nvidia.com/gpu.clique domain a against 16.0 spread" in told
    assert ("within the premium" in told) == (domain is not None)


def test_never_a_higher_priority_for_a_domain() -> None:
    # Domain b's cheap pair would do, but b-n1 runs at a higher priority than anything
    # the spread set takes; domain a costs more than the premium: spread.
    found, evicted, _ = _preempt(_full(older=5.0, priority_b1=SCAVENGER + 1), premium=1.5)
    assert (found, evicted) == (None, {"a0-0", "b0-0"})


def test_a_required_topology_is_not_weighed_against_a_spread() -> None:
    found, evicted, told = _preempt(_full(), premium=1.0, mode="required")
    assert found in {"a", "b"}
    assert len(evicted) == 2
    assert "premium" not in told
