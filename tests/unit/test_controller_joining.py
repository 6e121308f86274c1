"""Gangs that already run: replacements and late joiners go to the gang's own domain,
extras stay gated with a reason, a grown size is said, and recorded decisions whose pods
vanished finish with what is left."""

from __future__ import annotations

from typing import Any

from tests.builders import CLIQUE, NOW, admitted, cluster, member, told, tracked, unit, waits
from webhook.controller.core.deciding import Admit, Finish, Record, Wait, decide
from webhook.controller.core.pods import PodInfo


def running(name: str, i: int, domain: str, size: int | None = 4, placement: Record | None = None,
            **kw: Any) -> PodInfo:
    """A member let go earlier: ungated, pinned to its domain, bound there."""
    return member(name, i, size=size, gated=False, node_name=f"{domain}-n{i % 4}",
                  nodeSelector={CLIQUE: domain}, placement=placement, **kw)


def started(domain: str = "b", size: int | None = 4, alive: range = range(3),
            record_size: int | None = 4) -> list[PodInfo]:
    record = Record(domain, CLIQUE, tuple(f"g-{i}" for i in range(4)), NOW - 600, record_size)
    return [running("g", i, domain, size, placement=record if i == 0 else None)
            for i in alive]


def test_a_replacement_joins_the_gang_in_its_domain() -> None:
    pods = [*started(), member("g", 4, size=4, created=5)]
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW)
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    assert admit.record.domain == "b"
    assert admit.record.topology_key == CLIQUE
    assert [p.name for p in admit.ungate] == ["g-4"]
    assert admit.anchor.name == "g-4"
    assert told(admit) == ("Admitted: domain b; 1 pods, 8 GPUs; joining 3 members "
                               "already admitted")


def test_the_domain_is_known_from_the_pins_when_the_record_is_gone() -> None:
    pods = [running("g", i, "b") for i in (1, 2, 3)] + [member("g", 4, size=4, created=5)]
    assert admitted(decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW)) == {"g": "b"}


def test_a_pod_beyond_the_size_of_a_running_gang_stays_gated_and_says_why() -> None:
    pods = [*started(alive=range(4)), member("g", 4, size=4, created=5)]
    (wait,) = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW)
    assert isinstance(wait, Wait)
    assert wait.warning
    assert [p.name for p in wait.pods] == ["g-4"]
    assert wait.message == ("Oversize: the gang of 4 already has 4 members admitted; "
                            "this pod is not part of it")


def test_joiners_wait_until_all_of_them_are_there() -> None:
    joiner = member("g", 4, size=4, created=5)
    pods = [*started(alive=range(2)), joiner]
    assert waits(decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, joiner.created + 10)) == {
        "g": "Waiting: 1/2 pods present to rejoin a gang of 4 running with 2"}
    (late,) = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, joiner.created + 3600)
    assert isinstance(late, Wait)
    assert late.warning
    assert late.message.startswith("Incomplete")


def test_a_grown_size_from_the_owner_lets_new_members_join_and_says_so() -> None:
    pods = started(size=None, alive=range(2), record_size=2)
    pods += [member("g", i, created=5) for i in (4, 5)]
    actions = decide(tracked(cluster({"a": 4, "b": 4}), pods), {unit("g"): 4}, NOW)
    (admit,) = [a for a in actions if isinstance(a, Admit)]
    assert admit.record.domain == "b"
    assert admit.record.size == 4
    assert told(admit).endswith("; the gang's size changed from 2 to 4")


def test_joiners_that_do_not_fit_in_the_gangs_domain_wait() -> None:
    filler = [member("other", i, gated=False, node_name=f"b-n{i}") for i in range(4)]
    pods = [*started(alive=range(3)), member("g", 4, size=4, created=5)]
    nodes = cluster({"a": 4, "b": 4})
    # Domain b is full (the gang's 3 plus other pods): the replacement waits, never moves.
    assert waits(decide(tracked(nodes, pods + filler), {}, NOW)) == {
        "g": "Waiting: 1 pods to rejoin a gang of 4; needs 8 GPUs in nvidia.com/gpu.clique "
             "domain b, where the gang runs; it has 0 free"}


def test_a_recorded_decision_whose_pods_vanished_finishes_with_the_rest() -> None:
    record = Record("b", CLIQUE, ("g-0", "g-1", "g-2", "g-3"), NOW - 1, 4)
    pods = [running("g", 0, "b", placement=record), member("g", 1, size=4)]
    (finish,) = decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW)
    assert isinstance(finish, Finish)
    assert [p.name for p in finish.ungate] == ["g-1"]
    assert finish.record.domain == "b"


def test_records_written_by_a_replacement_add_to_the_first() -> None:
    first = Record("b", CLIQUE, ("g-0", "g-1"), NOW - 600, 2)
    second = Record("b", CLIQUE, ("g-2",), NOW - 1, 2)
    pods = [running("g", 0, "b", size=2, placement=first),
            member("g", 2, size=2, gated=False, nodeSelector={CLIQUE: "b"},
                   placement=second)]
    # g-1 was replaced by g-2 and both are accounted for: nothing to do.
    assert decide(tracked(cluster({"a": 4, "b": 4}), pods), {}, NOW) == []
