"""Sliced gangs: the whole gang inside one domain of its level, and each slice of it
inside one domain of the slice level, both pinned as the gates lift."""

from __future__ import annotations

from collections import Counter
from typing import Any

import jsonpatch
import pytest

from tests.builders import BLOCK, CLIQUE, NOW, blocks, member, running, tracked
from webhook.controller.core.actions import Action, Admit, Finish
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.deciding import QueueState, decide
from webhook.controller.core.placement.fitting import fit
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.preemption.criteria import PreemptionSettings
from webhook.controller.core.records import Record
from webhook.controller.shells.patches import ungate_patch
from webhook.keys import (
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
    SLICE_KEY_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
)

NO_PREEMPTION = QueueState(preemption=PreemptionSettings(enabled=False))


def sliced(name: str, n: int, size: int | None = 3, indexed: bool = False,
           **kw: Any) -> list[PodInfo]:
    """A gang of `n` 8-GPU pods needing one block, in slices of `size` pods each needing
    one NVLink domain (`indexed`: the webhook recorded each pod's slice)."""
    def marks(i: int) -> dict[str, str]:
        found = {TOPOLOGY_KEY_ANNOTATION: BLOCK}
        if size is not None:
            found |= {SLICE_KEY_ANNOTATION: CLIQUE, SLICE_EXPECTED_SIZE_ANNOTATION: str(size)}
            if indexed:
                found[SLICE_INDEX_ANNOTATION] = str(i // size)
        return found
    return [member(name, i, size=n, marks=marks(i), **kw) for i in range(n)]


def block_zero_full() -> list[PodInfo]:
    return running("busy", [f"b0d{d}-n{i}" for d in range(2) for i in range(4)])


def the_admit(actions: list[Action]) -> Admit:
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    return admit


def per_domain(admit: Admit) -> Counter[str]:
    return Counter(dict(admit.record.slices).values())


@pytest.mark.parametrize(("slice_size", "indexed", "expected"), [
    (3, False, {"b1d0": 3, "b1d1": 3}),
    (3, True, {"b1d0": 3, "b1d1": 3}),
    (2, False, {"b1d0": 4, "b1d1": 2}),     # three slices of 2: two fill one domain
])
def test_each_slice_lands_in_one_nvlink_domain_of_the_free_block(
        slice_size: int, indexed: bool, expected: dict[str, int]) -> None:
    pods = [*block_zero_full(), *sliced("s", 6, slice_size, indexed)]
    admit = the_admit(decide(tracked(blocks(2), pods), {}, NOW, state=NO_PREEMPTION))
    assert (admit.record.domain, admit.record.topology_key) == ("b1", BLOCK)
    assert admit.record.slice_key == CLIQUE
    assert per_domain(admit) == expected
    if indexed:
        # A slice is the pods the operator numbered together.
        by_slice = {i: {dict(admit.record.slices)[f"s-{j}"] for j in range(i * 3, i * 3 + 3)}
                    for i in range(2)}
        assert all(len(domains) == 1 for domains in by_slice.values())


def test_without_slices_the_gang_packs_four_and_two() -> None:
    plan = fit(sliced("s", 6, size=None), Snapshot(tracked(blocks(2), block_zero_full())),
               BLOCK, "required")
    assert isinstance(plan, Plan)
    assert plan.slices == {}
    domains = Counter(node.rsplit("-", 1)[0] for node in plan.assignments.values())
    assert sorted(domains.values()) == [2, 4]


def test_a_slice_that_fits_no_nvlink_domain_keeps_the_gang_waiting() -> None:
    # Block 1 has 2 free nodes in each NVLink domain: 4 free, 6 needed, and no domain
    # holds a slice of 3.
    busy = running("busy", [f"b0d{d}-n{i}" for d in range(2) for i in range(4)]
                   + [f"b1d{d}-n{i}" for d in range(2) for i in range(2)])
    actions = decide(tracked(blocks(2), [*busy, *sliced("s", 4, 3)]), {}, NOW,
                     state=NO_PREEMPTION)
    assert not [a for a in actions if isinstance(a, Admit)]


def test_the_record_keeps_each_members_slice() -> None:
    record = Record("b1", BLOCK, ("s-0", "s-1"), NOW, 2, slice_key=CLIQUE,
                    slices=(("s-0", "b1d0"), ("s-1", "b1d1")))
    assert Record.of(record.body()) == record
    assert record.slice_of("s-1") == "b1d1"


def test_the_gate_lifts_with_both_levels_pinned() -> None:
    record = Record("b1", BLOCK, ("s-0",), NOW, 1, slice_key=CLIQUE,
                    slices=(("s-0", "b1d0"),))
    pod = sliced("s", 1)[0]
    raw = {"spec": {"schedulingGates": [{"name": "gpu-airlock.io/gang"}]},
           "metadata": {"annotations": {}}}
    patched = jsonpatch.apply_patch(raw, ungate_patch(pod, record))
    assert patched["spec"]["nodeSelector"] == {BLOCK: "b1", CLIQUE: "b1d0"}


def test_members_promised_in_a_sliced_record_are_held_in_their_slice() -> None:
    # A leader died after lifting nothing but writing the record: the members are
    # finished into the slices it names.
    record = Record("b1", BLOCK, tuple(f"s-{i}" for i in range(6)), NOW - 5, 6,
                    slice_key=CLIQUE, slices=tuple((f"s-{i}", "b1d0" if i < 3 else "b1d1")
                                                   for i in range(6)))
    marks = {TOPOLOGY_KEY_ANNOTATION: BLOCK, SLICE_KEY_ANNOTATION: CLIQUE,
             SLICE_EXPECTED_SIZE_ANNOTATION: "3"}
    pods = [member("s", i, size=6, marks=marks, placement=record if i == 0 else None)
            for i in range(6)]
    actions = decide(tracked(blocks(2), [*block_zero_full(), *pods]), {}, NOW,
                     state=NO_PREEMPTION)
    (finish,) = [a for a in actions if isinstance(a, Finish)]
    assert finish.record.slice_of("s-4") == "b1d1"
    assert not [a for a in actions if isinstance(a, Admit)]
