"""The soak's checker on histories written by hand: a preemption carried out as it
should be passes, and each way of breaking an invariant is caught and named."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from bench.soak.checking import Kept, check
from bench.soak.findings import Findings
from bench.soak.replaying import Seen
from tests.builders import NOW, SEAL, raw_member
from webhook.controller.core.queues.accounting import FAIR_SHARE_KEY
from webhook.controller.core.records import PreemptionRecord, Record, dump_memory
from webhook.keys import (
    CLASS_LABEL,
    GATE,
    PLACEHOLDER_FOR_ANNOTATION,
    PLACEHOLDER_LABEL,
    PLACEMENT_ANNOTATION,
    PREEMPTION_ANNOTATION,
    SYSTEM_NAMESPACE,
)

NODES = {"n0": 8, "n1": 8, "n2": 8}
PREEMPTED = ("Preempted: a gang of higher priority needs the room; evicted to make room "
             "for gang ml/p (priority 50000, queue default) in any domain, losing 2.0 "
             "GPU-hours")


def _pod(gang: str, i: int, node: str | None = None, marked: bool = True) -> dict[str, Any]:
    raw = raw_member(gang, i, 8, 2, gated=node is None, node_name=node)
    raw["metadata"]["uid"] = f"uid-{gang}-{i}"
    if marked:
        raw["metadata"]["labels"][CLASS_LABEL] = "training"
    return raw


def _kept(at: float, usage: float) -> Kept:
    return Kept(at, {FAIR_SHARE_KEY: dump_memory("fairShare",
                                                 {"at": at, "usage": {"q": usage}})})


class History:
    """Seen pods, in order, one tick apart."""

    def __init__(self) -> None:
        self.seen: list[Seen] = []
        self.events: list[dict[str, Any]] = []
        self.kills: list[float] = []

    def add(self, kind: str, pod: dict[str, Any]) -> None:
        self.seen.append(Seen(float(len(self.seen)), kind, copy.deepcopy(pod)))

    def kill(self) -> None:
        self.kills.append(len(self.seen) - 0.5)

    def running(self, gang: str, nodes: list[str]) -> list[dict[str, Any]]:
        pods = [_pod(gang, i, n) for i, n in enumerate(nodes)]
        for p in pods:
            p["status"] = {"phase": "Running"}
            self.add("ADDED", p)
        return pods

    def evict(self, pod: dict[str, Any], told: bool = True, said: bool = True) -> None:
        """As the controller evicts: the eviction API's condition, then (unless it died
        first: `said`) its own, saying why."""
        pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                        "reason": "EvictionByEvictionAPI",
                                        "message": "Eviction API: evicting"}]
        self.add("MODIFIED", pod)
        if said:
            pod["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                            "reason": "PreemptionByScheduler",
                                            "message": PREEMPTED}]
            self.add("MODIFIED", pod)
        if told:
            self.events.append({"reason": "Preempted",
                                "involvedObject": {"uid": pod["metadata"]["uid"]}})
        pod["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"
        self.add("MODIFIED", pod)
        self.add("DELETED", pod)

    def record(self, anchor: dict[str, Any], victims: list[dict[str, Any]],
               nodes: tuple[str, ...] = ("n0", "n1")) -> None:
        record = PreemptionRecord(None, None, tuple(f"ml/{v['metadata']['name']}"
                                                    for v in victims), nodes, NOW,
                                  tuple(v["metadata"]["uid"] for v in victims))
        anchor["metadata"]["annotations"][PREEMPTION_ANNOTATION] = SEAL.dumps(
            record, anchor["metadata"]["uid"])
        self.add("MODIFIED", anchor)

    def admit(self, pods: list[dict[str, Any]], nodes: list[str], at: float = NOW + 5
              ) -> None:
        record = Record(None, None, tuple(p["metadata"]["name"] for p in pods), at, 2)
        pods[0]["metadata"]["annotations"][PLACEMENT_ANNOTATION] = SEAL.dumps(
            record, pods[0]["metadata"]["uid"])
        for pod in pods:
            pod["spec"]["schedulingGates"] = [g for g in pod["spec"]["schedulingGates"]
                                              if g["name"] != GATE]
            self.add("MODIFIED", pod)
        for pod, node in zip(pods, nodes, strict=True):
            pod["spec"]["nodeName"] = node
            self.add("MODIFIED", pod)

    def findings(self, kept: tuple[Kept, ...] = (), orphans: tuple[str, ...] = ()
                 ) -> Findings:
        return check(self.seen, NODES, self.events, self.kills, kept, orphans)


def _preemption(h: History, *, evict_all: bool = True, tell: bool = True, say: bool = True,
                admit: bool = True, kill_after_record: bool = False,
                lurker_first: bool = False, unschedulable: bool = False,
                onto: tuple[str, str] = ("n0", "n1")) -> None:
    """Scavenger gang `s` runs on n0 and n1; gang `p` evicts it and takes its place."""
    victims = h.running("s", ["n0", "n1"])
    preemptor = [_pod("p", i) for i in range(2)]
    for pod in preemptor:
        h.add("ADDED", pod)
    h.record(preemptor[0], victims)
    if kill_after_record:
        h.kill()
    if unschedulable:  # let go while the victims still hold its room
        stuck = preemptor[1]
        stuck["spec"]["schedulingGates"] = []
        stuck["status"] = {"conditions": [{"type": "PodScheduled", "status": "False",
                                           "reason": "Unschedulable"}]}
        h.add("MODIFIED", stuck)
    for victim in victims if evict_all else victims[:1]:
        h.evict(victim, told=tell, said=say)
    if lurker_first:
        lurker = _pod("l", 0)
        h.add("ADDED", lurker)
        h.admit([lurker], ["n0"])
    if admit:
        h.admit(preemptor, list(onto))


def test_a_preemption_carried_out_whole_passes() -> None:
    h = History()
    _preemption(h)
    found = h.findings()
    assert found.clean, found.text()
    assert (found.preemptions, found.victims, found.admissions) == (1, 2, 1)
    assert found.preemptions_resumed == 0


def test_a_victim_whose_condition_never_said_why_is_still_airlocks() -> None:
    # Killed after the evictions, before it marked them: the record and the events
    # still name them.
    h = History()
    _preemption(h, say=False)
    found = h.findings()
    assert found.clean, found.text()
    assert (found.victims, found.evicted_by_others) == (2, 0)


def test_a_preemption_finished_by_the_next_controller_is_counted() -> None:
    h = History()
    _preemption(h, kill_after_record=True)
    found = h.findings()
    assert found.clean, found.text()
    assert (found.kills, found.preemptions_resumed) == (1, 1)
    assert found.kill_phases == {"before the decision": 0, "evicting": 1,
                                 "victims terminating": 0, "lifting gates": 0,
                                 "after the gates": 0}


Break = Callable[[History], None]


@pytest.mark.parametrize(("broken", "kind", "says"), [
    (lambda h: _preemption(h, evict_all=False, onto=("n0", "n2")), "half-evicted gangs",
     "ml/s: ml/s-1 not evicted with the rest"),
    (lambda h: _preemption(h, tell=False), "evictions without an event",
     f"ml/s-0: evicted ({PREEMPTED[:60]}...) with no Event"),
    (lambda h: _preemption(h, admit=False), "victims without their preemptor admitted next",
     "ml/p evicted 2 pods: the preemptor was never admitted"),
    (lambda h: _preemption(h, lurker_first=True, onto=("n2", "n1")),
     "victims without their preemptor admitted next",
     "ml/p evicted 2 pods: ml/l-0 let onto the held nodes before the preemptor"),
    (lambda h: _preemption(h, unschedulable=True), "partial gangs",
     "ml/p: a member found no room after its gates were lifted"),
    (lambda h: [h.evict(p) for p in h.running("s", ["n0", "n1"])],
     "victims without their preemptor admitted next",
     "ml/s-0: evicted for a preemption no earlier record names"),
    (lambda h: h.running("s", ["n0", "n0"]), "over-committed nodes",
     "n0: 16 GPUs requested by bound pods at 1.0s, it has 8"),
    (lambda h: h.add("ADDED", _pod("u", 0, marked=False)), "pods stored without Airlock's marks",
     f"ml/u-0: stored without {CLASS_LABEL}"),
])
def test_each_broken_invariant_is_caught(broken: Break, kind: str, says: str) -> None:
    h = History()
    broken(h)
    found = h.findings()
    assert not found.clean
    message = found.violations[kind][0]
    assert message.split("\n")[0] == says
    if kind != "victims without their preemptor admitted next":  # about a decision
        assert "\n    history of ml/" in message  # the pod's story, change by change
    assert [k for k, v in found.violations.items() if v] == [kind]


def test_fair_share_kept_across_restarts_passes_and_a_reset_is_caught() -> None:
    h = History()
    _preemption(h)
    kept = (_kept(100.0, 5.0), _kept(100.0, 5.0), _kept(130.0, 6.0))
    assert h.findings(kept).clean
    found = h.findings((*kept, _kept(160.0, 0.0)))
    assert [k for k, v in found.violations.items() if v] == ["fair-share usage lost"]
    assert "usage of q below the last reading's" in found.violations[
        "fair-share usage lost"][0]
    assert found.kept_reads == 4


def test_a_placeholder_left_once_its_gang_is_gone_is_an_orphan() -> None:
    h = History()
    _preemption(h)
    found = h.findings(orphans=("airlock-system/placeholder-ml-c0-0",))
    assert found.violations["orphaned capacity requests"] == [
        "airlock-system/placeholder-ml-c0-0: still there once every gang was gone"]


def test_a_member_that_found_its_room_taken_by_a_placeholder_or_a_late_scheduler() -> None:
    # Placeholder room counts as free: the scheduler evicts the placeholder for the
    # member, which finds no room for a moment. A scheduler whose cache is behind finds
    # none where the apiserver shows some. Room nobody frees is still a violation.
    for case in ("placeholder leaves", "room was free", "never lands"):
        h = History()
        holder = _pod("x", 0, "n0", marked=False)
        holder["metadata"].update(namespace=SYSTEM_NAMESPACE, name="placeholder-x",
                                  labels={PLACEHOLDER_LABEL: "true"},
                                  annotations={PLACEHOLDER_FOR_ANNOTATION: "gang/ml/x"})
        h.add("ADDED", holder)
        member = _pod("m", 0)
        h.add("ADDED", member)
        member["spec"]["schedulingGates"] = []
        member["status"] = {"conditions": [{"type": "PodScheduled", "status": "False",
                                            "reason": "Unschedulable"}]}
        h.add("MODIFIED", member)
        if case == "placeholder leaves":
            h.add("DELETED", holder)
        if case != "never lands":
            member["spec"]["nodeName"] = "n0" if case == "placeholder leaves" else "n1"
            h.add("MODIFIED", member)
        found = h.findings()
        assert found.clean is (case != "never lands"), found.text()
        assert found.displaced_placeholders == (case == "placeholder leaves")
        assert len(found.placed_late) == (case == "room was free")
