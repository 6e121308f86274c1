"""bench.peers without a cluster: the objects each system's user writes for a job, what
the recorder makes of a pod watch (the job's barrier, its operator's restart, the
timelines simulate's metrics read), each system's timers at the replay's speed, the
report and its plots, and Kueue's inline webhook patches."""

from __future__ import annotations

from pathlib import Path
from typing import Any, get_args

import pytest
import yaml
from matplotlib.image import imread

from bench.peers.manifests import (
    ATTEMPT_LABEL,
    JOB_LABEL,
    SLICE_LABEL,
    Attempt,
    System,
    kueue_queues,
    pod_group,
    pods,
)
from bench.peers.measuring import main, parser
from bench.peers.peers import (
    COSCHEDULER,
    COSCHEDULING,
    KUEUE,
    KUEUE_GROUP_COUNT,
    KUEUE_GROUP_LABEL,
    KUEUE_QUEUE_LABEL,
    POD_GROUP_LABEL,
    at_speed,
    peer_timers,
    whole_seconds,
)
from bench.peers.recording import Finish, Recorder, Restart, Run
from bench.peers.reporting import gap, markdown
from bench.peers.timers import (
    TIMERS,
    TIMERS_FILE,
    airlock_timers,
    controller_flags,
    policies_at_speed,
)
from tests.paths import ROOT
from webhook.cli import build_parser
from webhook.keys import (
    CLASS_LABEL,
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_MIN_SIZE_ANNOTATION,
    GANG_NAME_LABEL,
    GANG_SIZE_ANNOTATION,
    PLACEMENT_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
)
from webhook.operators.kueue import keys as kueue
from webhook.policy.classes import ClassSpec, TopologyPlacement
from webhook.policy.loading import load_policy
from webhook.policy.model import Policy
from webhook.policy.queues import Duration, FairShareSpec, PreemptionSpec
from webhook.sandbox.manifests import merge_webhooks
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, HOST_LABEL, Shape
from webhook.simulation import clusters
from webhook.simulation.pacing import Pace
from webhook.simulation.plotting import plot
from webhook.simulation.simulating import simulate
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import Job, airlock_annotations

GANG = Job("llm", 10.0, "ml", "training", 2, 8, 100.0)
SINGLE = Job("web", 0.0, "ml", "inference", 1, 2, 50.0)
ELASTIC = Job("el", 0.0, "ml", "training", 4, 8, 100.0, min_pods=2, expected_runtime=120.4)
SLICED = Job("sl", 0.0, "ml", "training", 8, 8, 100.0, required_topology="block",
             slice_topology="nvlink", slice_size=4)


def test_each_system_gets_its_own_gang_convention(policy: Policy) -> None:
    first = Attempt(GANG, 0)
    stock, cosched, kueue, airlock = (pods(s, first, policy) for s in
                                      ("stock", "coscheduling", "kueue", "airlock"))
    assert [p["metadata"]["name"] for p in stock] == ["llm-0", "llm-1"]
    assert stock[0]["spec"]["priorityClassName"] == \
        policy.classes["training"].priority_class.name
    assert POD_GROUP_LABEL not in stock[0]["metadata"]["labels"]
    assert cosched[0]["spec"]["schedulerName"] == COSCHEDULER
    assert cosched[0]["metadata"]["labels"][POD_GROUP_LABEL] == "llm"
    assert kueue[0]["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "gpus"
    assert kueue[0]["metadata"]["labels"][KUEUE_GROUP_LABEL] == "llm"
    assert kueue[0]["metadata"]["annotations"][KUEUE_GROUP_COUNT] == "2"
    # Airlock's user writes the class and the gang; the webhook does the rest.
    assert "priorityClassName" not in airlock[0]["spec"]
    assert "tolerations" not in airlock[0]["spec"]
    assert airlock[0]["metadata"]["labels"][CLASS_LABEL] == "training"
    assert airlock[0]["metadata"]["labels"][GANG_NAME_LABEL] == "llm"
    assert airlock[0]["metadata"]["annotations"][GANG_SIZE_ANNOTATION] == "2"
    for pod in (*stock, *cosched, *kueue, *airlock):
        assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "8"}


def test_a_single_pod_has_no_gang_and_a_restart_has_a_new_one(policy: Policy) -> None:
    (single,) = pods("kueue", Attempt(SINGLE, 0), policy)
    assert KUEUE_GROUP_LABEL not in single["metadata"]["labels"]
    assert pod_group(Attempt(SINGLE, 0)) is None
    again = Attempt(GANG, 2)
    group = pod_group(again)
    assert group is not None
    assert group["metadata"]["name"] == "llm-r2"
    assert group["spec"] == {"minMember": 2}
    labels = pods("coscheduling", again, policy)[1]["metadata"]["labels"]
    assert labels[POD_GROUP_LABEL] == "llm-r2"
    assert labels[ATTEMPT_LABEL] == "2"


def test_kueue_gang_pods_ask_kueue_for_the_topology_their_class_asks_of_airlock(
        policy: Policy) -> None:
    required = "kueue.x-k8s.io/podset-required-topology"
    preferred = "kueue.x-k8s.io/podset-preferred-topology"
    assert policy.classes["training"].topology == TopologyPlacement(level="nvlink",
                                                                    mode="required")
    gang = pods("kueue", Attempt(GANG, 0), policy)
    assert all(p["metadata"]["annotations"][required] == CLIQUE_LABEL for p in gang)
    (first, _) = pods("kueue", Attempt(GANG, 0), preferring_nvlink(policy))
    assert first["metadata"]["annotations"][preferred] == CLIQUE_LABEL
    assert required not in first["metadata"]["annotations"]
    # A class with no topology, and a single pod, ask for none.
    serving = Job("svc", 0.0, "ml", "inference", 2, 8, 50.0)
    for pod in (*pods("kueue", Attempt(serving, 0), policy),
                *pods("kueue", Attempt(SINGLE, 0), policy)):
        assert not {required, preferred} & set(pod["metadata"]["annotations"])


def preferring_nvlink(policy: Policy) -> Policy:
    """The policy with training's topology preferred, not required."""
    training = policy.classes["training"].model_copy(
        update={"topology": TopologyPlacement(level="nvlink", mode="preferred")})
    return policy.model_copy(update={"classes": {**policy.classes, "training": training}})


def with_blocks(policy: Policy) -> Policy:
    return policy.model_copy(update={"topology_levels": {**policy.topology_levels,
                                                         "block": BLOCK_LABEL}})


def test_airlock_gets_what_a_job_states_as_simulate_writes_it(policy: Policy) -> None:
    policy = with_blocks(policy)
    elastic = pods("airlock", Attempt(ELASTIC, 1), policy)
    assert elastic[0]["metadata"]["annotations"] == airlock_annotations(ELASTIC) == {
        GANG_SIZE_ANNOTATION: "4", GANG_MIN_SIZE_ANNOTATION: "2",
        EXPECTED_RUNTIME_ANNOTATION: "121s"}  # whole seconds, rounded up
    assert elastic[0]["metadata"]["labels"][GANG_NAME_LABEL] == "el-r1"
    sliced = pods("airlock", Attempt(SLICED, 0), policy)
    assert sliced[7]["metadata"]["annotations"] == {
        GANG_SIZE_ANNOTATION: "8", REQUIRED_TOPOLOGY_ANNOTATION: "block",
        SLICE_REQUIRED_TOPOLOGY_ANNOTATION: "nvlink", SLICE_SIZE_ANNOTATION: "4"}
    # A single pod states its run time alone: no gang.
    stated = Job("s", 0.0, "ml", "inference", 1, 2, 50.0, expected_runtime=60.0)
    (single,) = pods("airlock", Attempt(stated, 0), policy)
    assert single["metadata"]["annotations"] == {EXPECTED_RUNTIME_ANNOTATION: "60s"}
    # At 100x the job runs 0.6 real seconds: it states what it runs, rounded up.
    (fast,) = pods("airlock", Attempt(stated, 0), policy, speed=100)
    assert fast["metadata"]["annotations"] == {EXPECTED_RUNTIME_ANNOTATION: "1s"}


def test_kueue_gets_topology_and_slices_by_node_label_and_an_elastic_job_whole(
        policy: Policy) -> None:
    policy = with_blocks(policy)
    sliced = pods("kueue", Attempt(SLICED, 0), policy)
    # The job's own level wins over its class's (nvlink, required, in this policy).
    assert all(p["metadata"]["annotations"] == {
        KUEUE_GROUP_COUNT: "8", kueue.REQUIRED_TOPOLOGY: BLOCK_LABEL,
        kueue.SLICE_REQUIRED_TOPOLOGY: CLIQUE_LABEL, kueue.SLICE_SIZE: "4"} for p in sliced)
    # A pod group is admitted whole in Kueue: the elastic job is all its pods, with its
    # class's topology, and nothing of a minimum or a run time.
    elastic = pods("kueue", Attempt(ELASTIC, 0), policy)
    assert len(elastic) == 4
    assert elastic[0]["metadata"]["annotations"] == {
        KUEUE_GROUP_COUNT: "4", kueue.REQUIRED_TOPOLOGY: CLIQUE_LABEL}


def test_coscheduling_gets_an_elastic_jobs_minimum_and_stock_the_pods_alone(
        policy: Policy) -> None:
    policy = with_blocks(policy)
    group = pod_group(Attempt(ELASTIC, 0))
    assert group is not None
    assert group["spec"] == {"minMember": 2}
    assert len(pods("coscheduling", Attempt(ELASTIC, 0), policy)) == 4
    sliced = pod_group(Attempt(SLICED, 0))
    assert sliced is not None
    assert sliced["spec"] == {"minMember": 8}
    for system in ("coscheduling", "stock"):
        for job in (ELASTIC, SLICED):
            assert all(p["metadata"]["annotations"] == {}
                       for p in pods(system, Attempt(job, 0), policy))


def together(job: str, key: str, **extra: str) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {JOB_LABEL: job, ATTEMPT_LABEL: "0", **extra}},
            "topologyKey": key}


@pytest.mark.parametrize("system", ["stock", "coscheduling"])
def test_stock_and_coscheduling_pods_keep_a_gangs_topology_by_pod_affinity(
        system: System, policy: Policy) -> None:
    policy = with_blocks(policy)
    sliced = pods(system, Attempt(SLICED, 0), policy)
    # The job's block for all eight, and each slice of four in one NVLink domain.
    assert [p["metadata"]["labels"][SLICE_LABEL] for p in sliced] == list("00001111")
    assert sliced[5]["spec"]["affinity"] == {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            together("sl", BLOCK_LABEL), together("sl", CLIQUE_LABEL, **{SLICE_LABEL: "1"})]}}
    # No level of its own: its class's (nvlink, required here), as Kueue is given it.
    (elastic, *_) = pods(system, Attempt(ELASTIC, 0), policy)
    assert elastic["spec"]["affinity"]["podAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [together("el", CLIQUE_LABEL)]}
    assert SLICE_LABEL not in elastic["metadata"]["labels"]
    (gang, _) = pods(system, Attempt(GANG, 0), preferring_nvlink(policy))
    assert gang["spec"]["affinity"]["podAffinity"] == {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 100, "podAffinityTerm": together("llm", CLIQUE_LABEL)}]}
    (single,) = pods(system, Attempt(SINGLE, 0), policy)
    assert "affinity" not in single["spec"]
    assert all("affinity" not in p["spec"] for p in pods("kueue", Attempt(SLICED, 0), policy))


def test_a_job_paces_by_the_share_of_its_pods_bound() -> None:
    # 100 s of work at full size: half the pods bound, twice as long.
    pace = Pace.start(100.0, 10.0, 2, 4)
    assert pace.ends == 210.0
    # 50 s later, 25 s of work done; the other 75 s at three quarters: 100 s more.
    pace = pace.rebound(60.0, 3)
    assert (pace.work_left, pace.ends) == (75.0, 160.0)
    assert Pace.start(100.0, 0.5, 4, 4).ends == 100.5


def test_kueue_gets_a_topology_a_cohort_of_every_gpu_and_a_queue_per_team() -> None:
    docs = kueue_queues(["a", "b"], Shape(nodes=16, gpus_per_node=8))
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        assert doc["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        by_kind.setdefault(doc["kind"], []).append(doc)
    (topology,) = by_kind["Topology"]
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == \
        [BLOCK_LABEL, CLIQUE_LABEL, HOST_LABEL]
    (flavor,) = by_kind["ResourceFlavor"]
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    assert flavor["spec"]["nodeLabels"]  # Kueue requires some with a topology
    (cohort,) = by_kind["Cohort"]
    assert cohort["spec"]["resourceGroups"][0]["flavors"][0] == {
        "name": flavor["metadata"]["name"],
        "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 128}]}
    queues = {q["metadata"]["name"]: q["spec"] for q in by_kind["ClusterQueue"]}
    assert len(queues) == 2
    for spec in queues.values():
        assert spec["cohortName"] == cohort["metadata"]["name"]
        assert spec["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"] == 0
        assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    assert {(q["metadata"]["namespace"], q["spec"]["clusterQueue"])
            for q in by_kind["LocalQueue"]} == {("a", "a-gpus"), ("b", "b-gpus")}
    assert queues["a-gpus"]["namespaceSelector"]["matchLabels"] == \
        {"kubernetes.io/metadata.name": "a"}


def test_a_timer_counted_in_whole_seconds_never_reaches_zero() -> None:
    assert whole_seconds(60, 1) == 60
    assert whole_seconds(60, 100) == 1
    assert whole_seconds(3600, 100) == 36
    assert whole_seconds(60, 50) == 2


def test_kueue_gets_its_policy_timers_at_the_replays_speed_and_its_guards_in_real_time(
        ) -> None:
    assert peer_timers(100) == {"kueue": {"backoffBaseSeconds": 1, "backoffMaxSeconds": 36}}
    kueue = yaml.safe_load(str(at_speed(KUEUE, 100).config))
    assert kueue["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert kueue["waitForPodsReady"]["requeuingStrategy"] == {
        "timestamp": "Eviction", "backoffBaseSeconds": 1, "backoffMaxSeconds": 36}
    # It waits for pods to start, which takes this machine real seconds at any speed.
    assert kueue["waitForPodsReady"]["timeout"] == "5m"
    assert kueue["fairSharing"]["preemptionStrategies"]
    assert kueue["featureGates"]["TopologyAwareScheduling"] is True
    assert kueue["integrations"]["frameworks"] == ["pod"]
    # Only the configuration changes: the build, and its cache, stay.
    assert at_speed(KUEUE, 100).tool == KUEUE.tool
    assert yaml.safe_load(str(KUEUE.config))["waitForPodsReady"]["requeuingStrategy"][
        "backoffBaseSeconds"] == 60
    # Coscheduling's one timer waits for the scheduler: it stays as it is.
    assert at_speed(COSCHEDULING, 100) == COSCHEDULING


def test_every_duration_of_airlocks_timed_settings_is_scaled(policy: Policy) -> None:
    # A Duration field, by the pattern pydantic keeps for it: a timer added to one of
    # these settings later is scaled too, or this fails.
    (duration,) = PreemptionSpec.model_fields["delay"].metadata
    durations = {
        name: {f.alias or n for n, f in spec.model_fields.items() if duration in f.metadata}
        for name, spec in (("preemption", PreemptionSpec), ("fairShare", FairShareSpec))}
    assert durations == {name: set(timers) for name, (_, timers) in TIMERS.items()}
    assert {f.alias for f in ClassSpec.model_fields.values()
            if Duration in get_args(f.annotation)} == {"preemptionDelay"}
    timers = airlock_timers(policy, 100)
    assert airlock_timers(load_policy(ROOT / "policies"), 100)[
        "classes.inference.preemptionDelay"] == "0s"
    assert timers["preemption.delay"] == "0.3s"  # 30s
    assert timers["preemption.minRuntime"] == "3s"  # 5m
    assert timers["fairShare.halfLife"] == "864s"  # 24h
    assert timers["controller.forecastResolution"] == "0.15s"  # 15s


def test_the_controllers_forecast_resolution_is_scaled_and_it_accepts_the_flag() -> None:
    flags = controller_flags(100)
    assert flags == ["--forecast-resolution", "0.15"]
    assert build_parser().parse_args(["controller", *flags]).forecast_resolution == 0.15


def test_airlocks_policies_at_speed_keep_each_setting_defined_once(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    classes = (ROOT / "policies" / "10-classes.yaml").read_text()
    (source / "10-classes.yaml").write_text(classes.replace(
        "    training:\n", "    training:\n      preemptionDelay: 2m\n"))
    (source / "00-scope.yaml").write_text((ROOT / "policies" / "00-scope.yaml").read_text())
    (source / "20-rules.yaml").write_text((ROOT / "policies" / "20-rules.yaml").read_text())
    (source / "30-preempt.yaml").write_text(yaml.safe_dump(
        {"apiVersion": "gpu-airlock.io/v1alpha1", "kind": "AirlockPolicy",
         "metadata": {"name": "preempt"},
         "spec": {"preemption": {"delay": "10s", "minRuntime": "1m"}}}))
    policy = load_policy(source)
    copied = policies_at_speed(source, tmp_path / "copy", policy, 10)
    assert sorted(p.name for p in copied.iterdir()) == [
        "00-scope.yaml", "10-classes.yaml", "20-rules.yaml", "30-preempt.yaml", TIMERS_FILE]
    # A file without timers is copied as it is, comments and all.
    assert (copied / "20-rules.yaml").read_text() == (source / "20-rules.yaml").read_text()
    scaled = load_policy(copied)
    assert (scaled.preemption.delay, scaled.preemption.min_runtime) == ("1s", "6s")
    assert scaled.fair_share.half_life == "8640s"
    # A class's own delay is scaled where it is set; the rest of the class is kept.
    assert scaled.classes["training"].preemption_delay == "12s"
    assert scaled.classes["inference"].preemption_delay == "0s"
    assert {n: c.model_copy(update={"preemption_delay": None})
            for n, c in scaled.classes.items()} == {
        n: c.model_copy(update={"preemption_delay": None}) for n, c in policy.classes.items()}


def observed(name: str, attempt: int = 0, node: str | None = None,
             phase: str = "Pending", deleting: bool = False, job: str = "llm",
             no_room: bool = False, placement: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml",
                            "labels": {JOB_LABEL: job, ATTEMPT_LABEL: str(attempt)}}
    if placement is not None:
        meta["annotations"] = {PLACEMENT_ANNOTATION: placement}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    status: dict[str, Any] = {"phase": phase}
    if no_room:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable"}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def test_a_gang_runs_once_its_last_pod_does_and_its_half_placed_time_counts() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32, speed=10)
    assert rec.observe(0.5, observed("llm-0")) == []
    assert rec.observe(1.0, observed("llm-0", node="n1", phase="Running")) == []
    assert rec.observe(2.0, observed("llm-1", no_room=True)) == []
    assert rec.observe(4.0, observed("llm-1", node="n2")) == [Run(Attempt(GANG, 0), 14.0)]
    assert rec.observe(4.1, observed("llm-1", node="n2", phase="Running")) == []
    assert rec.running() == 1
    rec.observe(6.0, observed("llm-0", node="n1", phase="Succeeded"))
    assert not rec.settled()
    rec.observe(6.5, observed("llm-1", node="n2", phase="Succeeded"))
    assert rec.settled()
    (t,) = rec.timelines(end=10.0)
    assert t.whole == [(40.0, 65.0)]
    assert t.completed == 65.0
    # llm-0 held 8 GPUs from 10 to 40 (trace seconds) while its sibling had no node.
    assert summarize([t], 32)["partialGangGpuSeconds"] == 8 * 30


def test_a_gang_bound_in_one_go_is_never_half_placed() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32, speed=100)
    rec.observe(1.00, observed("llm-0", node="n1"))
    assert rec.observe(1.02, observed("llm-1", node="n2")) == [Run(Attempt(GANG, 0), 2.02)]
    rec.observe(2.0, observed("llm-0", node="n1", phase="Succeeded"))
    rec.observe(2.0, observed("llm-1", node="n2", phase="Succeeded"))
    (t,) = rec.timelines(end=3.0)
    assert summarize([t], 32)["partialGangGpuSeconds"] == 0


@pytest.mark.parametrize(("second_bound", "half_placed"), [
    # Turned away whole, then let through whole (coscheduling's Permit): placed together.
    (5.05, 0),
    # Turned away whole, then one pod placed and its sibling only 4 s later, with no
    # word from the scheduler meanwhile: llm-0 held 8 GPUs alone for 4 s (x10).
    (9.0, 8 * 40),
])
def test_a_gang_turned_away_whole_is_half_placed_only_if_its_pods_bind_apart(
        second_bound: float, half_placed: int) -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32, speed=10)
    rec.observe(1.0, observed("llm-0", no_room=True))
    rec.observe(1.0, observed("llm-1", no_room=True))
    assert rec.observe(5.0, observed("llm-0", node="n1")) == []
    assert rec.observe(second_bound, observed("llm-1", node="n2")) == \
        [Run(Attempt(GANG, 0), second_bound + 10)]
    (t,) = rec.timelines(end=10.0)
    assert summarize([t], 32)["partialGangGpuSeconds"] == half_placed


def test_a_preempted_gang_starts_again_and_its_old_pods_still_release() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32, speed=1)
    rec.observe(1.0, observed("llm-0", node="n1", phase="Running"))
    rec.observe(1.0, observed("llm-1", node="n2", phase="Running"))
    actions = rec.observe(2.0, observed("llm-1", node="n2", phase="Running", deleting=True))
    assert actions == [Restart(Attempt(GANG, 0), Attempt(GANG, 1))]
    # The old attempt's pods act no more, but their release counts.
    assert rec.observe(2.5, observed("llm-0", node="n1", deleting=True)) == []
    assert rec.observe(3.0, observed("llm-r1-0", 1, "n3", "Running")) == []
    assert rec.observe(3.0, observed("llm-r1-1", 1, "n4", "Running")) == \
        [Run(Attempt(GANG, 1), 103.0)]
    (t,) = rec.timelines(end=5.0)
    assert t.preemptions == 1
    assert t.whole == [(1.0, 2.0), (3.0, 5.0)]
    assert sorted(t.holds) == [(1.0, 2.0, 8), (1.0, 2.5, 8), (3.0, 5.0, 8), (3.0, 5.0, 8)]


def test_an_elastic_job_runs_from_its_minimum_ends_sooner_as_pods_join_and_drops_the_rest(
        ) -> None:
    rec = Recorder([ELASTIC], gpus_per_node=8, capacity=32, speed=1)
    assert rec.observe(1.0, observed("el-0", node="n1", job="el")) == []
    assert rec.observe(1.0, observed("el-3", no_room=True, job="el")) == []
    assert rec.observe(2.0, observed("el-1", node="n2", job="el")) == \
        [Run(Attempt(ELASTIC, 0), 202.0)]
    assert rec.running() == 1
    # A third pod at 52: 25 s of work done at half pace, 75 s left at three quarters.
    assert rec.observe(52.0, observed("el-2", node="n3", job="el")) == \
        [Run(Attempt(ELASTIC, 0), 152.0)]
    assert rec.observe(52.5, observed("el-2", node="n3", phase="Running", job="el")) == []
    # Its end: the pod still waiting goes, and its loss starts nothing again.
    assert rec.observe(152.0, observed("el-0", node="n1", phase="Succeeded", job="el")) == \
        [Finish(Attempt(ELASTIC, 0), ("el-3",))]
    rec.observe(152.0, observed("el-1", node="n2", phase="Succeeded", job="el"))
    assert rec.observe(152.5, observed("el-3", deleting=True, job="el")) == []
    assert not rec.settled()
    rec.observe(153.0, observed("el-2", node="n3", phase="Succeeded", job="el"))
    assert rec.settled()
    (t,) = rec.timelines(end=160.0)
    assert t.whole == [(2.0, 153.0)]
    assert (t.completed, t.preemptions) == (153.0, 0)
    # el-0 held its node alone for a second while el-3 found none: the only partial
    # time; el-2, bound after the job started, ran in it.
    assert summarize([t], 32)["partialGangGpuSeconds"] == 8 * 1
    assert sorted(t.holds) == [(1.0, 152.0, 8), (2.0, 152.0, 8), (52.0, 153.0, 8)]


def test_pods_of_no_job_and_jobs_that_cannot_fit_do_not_hold_the_run() -> None:
    huge = Job("huge", 0.0, "ml", "training", 8, 8, 10.0)
    rec = Recorder([SINGLE, huge], gpus_per_node=8, capacity=32, speed=1)
    assert rec.observe(1.0, observed("x-0", node="n1", phase="Running", job="other")) == []
    rec.observe(1.0, observed("web-0", node="n1", phase="Running", job="web"))
    rec.observe(2.0, observed("web-0", node="n1", phase="Succeeded", job="web"))
    assert rec.settled()
    timelines = {t.name: t for t in rec.timelines(end=3.0)}
    assert timelines["huge"].never_runnable
    assert timelines["web"].completed == 2.0


@pytest.fixture
def summary() -> dict[str, Any]:
    return {"jobs": 2, "completed": 2, "stuck": 0, "neverRunnable": 0, "makespan": 100.0,
            "wait": {"p50": 10.0, "p99": 30.0}, "utilization": 0.5,
            "partialGangGpuSeconds": 0, "preemptions": 0, "lostGpuSeconds": 0}


def test_the_report_shows_each_system_and_names_the_one_that_failed(
        summary: dict[str, Any]) -> None:
    stuck = {**summary, "completed": 1, "stuck": 1,
             "classes": {"training": {"wait": {"p50": 1200.0, "p99": 3000.0}}}}
    table = markdown({"stock": [stuck], "kueue": [{"error": "BuildError: no Go"}]},
                     [summary])
    assert table.splitlines()[0] == "| | stock | airlock simulate |"
    assert "| jobs completed | 1 / 2, 1 stuck | 2 / 2 |" in table
    assert "| wait p50 / p99 | 10 / 30 s | 10 / 30 s |" in table
    assert "| training wait p50 / p99 | 1,200 / 3,000 s | - |" in table
    assert "| preemptions | 0 | 0 |" in table
    assert "| GPU-hours lost to preemption | 0.00 | 0.00 |" in table
    assert "**kueue** did not run: BuildError: no Go" in table
    simulated = {**summary, "wait": {"p50": 4.0, "p99": 40.0}, "utilization": 0.55}
    assert gap(summary, simulated) == {"waitP50": -6.0, "waitP99": 10.0,
                                       "utilization": 0.05}


def test_inline_kustomize_patches_narrow_the_webhooks_they_name() -> None:
    doc: dict[str, Any] = {"kind": "MutatingWebhookConfiguration",
           "metadata": {"name": "mutating-webhook-configuration"},
           "webhooks": [{"name": "mpod.kb.io", "sideEffects": "None"},
                        {"name": "mjob.kb.io"}]}
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name",
                                      "operator": "NotIn", "values": ["kube-system"]}]}
    patch: dict[str, Any] = {"kind": "MutatingWebhookConfiguration",
             "metadata": {"name": "mutating-webhook-configuration"},
             "webhooks": [{"name": "mpod.kb.io", "namespaceSelector": selector}]}
    other = {**patch, "kind": "ValidatingWebhookConfiguration"}
    merged = merge_webhooks(doc, [patch, other])
    assert merged["webhooks"][0] == {"name": "mpod.kb.io", "sideEffects": "None",
                                     "namespaceSelector": selector}
    assert merged["webhooks"][1] == {"name": "mjob.kb.io"}
    assert "namespaceSelector" not in doc["webhooks"][0]  # the input is left alone


def test_build_takes_the_peers_by_name_and_refuses_unknown_ones(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert parser().parse_args(["--build", "kueue, coscheduling"]).build == \
        [KUEUE, COSCHEDULING]
    with pytest.raises(SystemExit):
        parser().parse_args(["--build", "kueue,volcano"])
    assert "unknown peer volcano; known: coscheduling, kueue" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # neither a trace to replay nor peers to build
        main([])
    assert "--trace is required (or --build NAMES)" in capsys.readouterr().err


def test_five_runs_plot_on_a_grid_a_page_shows_whole(policy: Policy, tmp_path: Path) -> None:
    jobs = [GANG, SINGLE]
    runs = [simulate(jobs, policy, clusters.Shape(2, 8, 2), "airlock", label=str(i))
            for i in range(5)]
    for path in plot(runs, tmp_path):
        height, width, _ = imread(path).shape
        assert width <= 1600, path.name
        assert height < width, path.name


@pytest.mark.parametrize(("placements", "backfilled"), [
    ({"llm-0": '{"members": ["llm-0", "llm-1"], "backfilledUntil": 120.0}'}, 1),
    ({"llm-0": '{"members": ["llm-0", "llm-1"], "at": 1.0}'}, 0),
    ({"llm-0": '{"backfilledUntil": null}', "llm-1": "not json {backfilledUntil"}, 0),
    # A record seen again on every change of its pod is one admission.
    ({"llm-0": '{"backfilledUntil": 60}', "llm-1": '{"backfilledUntil": 90}'}, 2),
])
def test_airlocks_backfills_are_counted_from_its_placement_records(
        placements: dict[str, str], backfilled: int) -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32, speed=1)
    for name in ("llm-0", "llm-1"):
        for _ in range(2):
            rec.observe(1.0, observed(name, node="n1", placement=placements.get(name)))
    (t,) = rec.timelines(end=3.0)
    assert t.backfilled == backfilled
