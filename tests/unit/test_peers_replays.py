"""bench.peers without a cluster: the objects each system's user writes for a job, what
the recorder makes of a pod watch (the job's barrier, its operator's restart, the
timelines simulate's metrics read), the report, and Kueue's inline webhook patches."""

from __future__ import annotations

from typing import Any

import pytest

from bench.peers.manifests import (
    ATTEMPT_LABEL,
    JOB_LABEL,
    Attempt,
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
)
from bench.peers.recording import Recorder, Restart, Run
from bench.peers.reporting import gap, markdown
from webhook.keys import CLASS_LABEL, GANG_NAME_LABEL, GANG_SIZE_ANNOTATION
from webhook.policy.model import Policy
from webhook.sandbox.manifests import merge_webhooks
from webhook.simulation.timelines import summarize
from webhook.simulation.traces import Job

GANG = Job("llm", 10.0, "ml", "training", 2, 8, 100.0)
SINGLE = Job("web", 0.0, "ml", "inference", 1, 2, 50.0)


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


def test_kueue_gets_one_cluster_queue_with_every_gpu_and_a_local_queue_each() -> None:
    docs = kueue_queues(["a", "b"], 128)
    (cq,) = [d for d in docs if d["kind"] == "ClusterQueue"]
    quota = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert quota == [{"name": "nvidia.com/gpu", "nominalQuota": 128}]
    assert sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == "LocalQueue") == \
        ["a", "b"]


def observed(name: str, attempt: int = 0, node: str | None = None,
             phase: str = "Pending", deleting: bool = False, job: str = "llm",
             no_room: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ml",
                            "labels": {JOB_LABEL: job, ATTEMPT_LABEL: str(attempt)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-23T00:00:00Z"
    status: dict[str, Any] = {"phase": phase}
    if no_room:
        status["conditions"] = [{"type": "PodScheduled", "status": "False",
                                 "reason": "Unschedulable"}]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def test_a_gang_runs_once_its_last_pod_does_and_its_half_placed_time_counts() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32)
    assert rec.observe(0.5, observed("llm-0")) == []
    assert rec.observe(1.0, observed("llm-0", node="n1", phase="Running")) == []
    assert rec.observe(2.0, observed("llm-1", no_room=True)) == []
    assert rec.observe(4.0, observed("llm-1", node="n2")) == [Run(Attempt(GANG, 0))]
    assert rec.observe(4.1, observed("llm-1", node="n2", phase="Running")) == []
    assert rec.running() == 1
    rec.observe(6.0, observed("llm-0", node="n1", phase="Succeeded"))
    assert not rec.settled()
    rec.observe(6.5, observed("llm-1", node="n2", phase="Succeeded"))
    assert rec.settled()
    (t,) = rec.timelines(end=10.0, speed=10)
    assert t.whole == [(40.0, 65.0)]
    assert t.completed == 65.0
    # llm-0 held 8 GPUs from 10 to 40 (trace seconds) while its sibling had no node.
    assert summarize([t], 32)["partialGangGpuSeconds"] == 8 * 30


def test_a_gang_bound_in_one_go_is_never_half_placed() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32)
    rec.observe(1.00, observed("llm-0", node="n1"))
    assert rec.observe(1.02, observed("llm-1", node="n2")) == [Run(Attempt(GANG, 0))]
    rec.observe(2.0, observed("llm-0", node="n1", phase="Succeeded"))
    rec.observe(2.0, observed("llm-1", node="n2", phase="Succeeded"))
    (t,) = rec.timelines(end=3.0, speed=100)
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
    rec = Recorder([GANG], gpus_per_node=8, capacity=32)
    rec.observe(1.0, observed("llm-0", no_room=True))
    rec.observe(1.0, observed("llm-1", no_room=True))
    assert rec.observe(5.0, observed("llm-0", node="n1")) == []
    assert rec.observe(second_bound, observed("llm-1", node="n2")) == [Run(Attempt(GANG, 0))]
    (t,) = rec.timelines(end=10.0, speed=10)
    assert summarize([t], 32)["partialGangGpuSeconds"] == half_placed


def test_a_preempted_gang_starts_again_and_its_old_pods_still_release() -> None:
    rec = Recorder([GANG], gpus_per_node=8, capacity=32)
    rec.observe(1.0, observed("llm-0", node="n1", phase="Running"))
    rec.observe(1.0, observed("llm-1", node="n2", phase="Running"))
    actions = rec.observe(2.0, observed("llm-1", node="n2", phase="Running", deleting=True))
    assert actions == [Restart(Attempt(GANG, 0), Attempt(GANG, 1))]
    # The old attempt's pods act no more, but their release counts.
    assert rec.observe(2.5, observed("llm-0", node="n1", deleting=True)) == []
    assert rec.observe(3.0, observed("llm-r1-0", 1, "n3", "Running")) == []
    assert rec.observe(3.0, observed("llm-r1-1", 1, "n4", "Running")) == \
        [Run(Attempt(GANG, 1))]
    (t,) = rec.timelines(end=5.0, speed=1)
    assert t.preemptions == 1
    assert t.whole == [(1.0, 2.0), (3.0, 5.0)]
    assert sorted(t.holds) == [(1.0, 2.0, 8), (1.0, 2.5, 8), (3.0, 5.0, 8), (3.0, 5.0, 8)]


def test_pods_of_no_job_and_jobs_that_cannot_fit_do_not_hold_the_run() -> None:
    huge = Job("huge", 0.0, "ml", "training", 8, 8, 10.0)
    rec = Recorder([SINGLE, huge], gpus_per_node=8, capacity=32)
    assert rec.observe(1.0, observed("x-0", node="n1", phase="Running", job="other")) == []
    rec.observe(1.0, observed("web-0", node="n1", phase="Running", job="web"))
    rec.observe(2.0, observed("web-0", node="n1", phase="Succeeded", job="web"))
    assert rec.settled()
    timelines = {t.name: t for t in rec.timelines(end=3.0, speed=1)}
    assert timelines["huge"].never_runnable
    assert timelines["web"].completed == 2.0


@pytest.fixture
def summary() -> dict[str, Any]:
    return {"jobs": 2, "completed": 2, "stuck": 0, "neverRunnable": 0, "makespan": 100.0,
            "wait": {"p50": 10.0, "p99": 30.0}, "utilization": 0.5,
            "partialGangGpuSeconds": 0, "preemptions": 0, "lostGpuSeconds": 0}


def test_the_report_shows_each_system_and_names_the_one_that_failed(
        summary: dict[str, Any]) -> None:
    table = markdown({"stock": summary, "kueue": {"error": "BuildError: no Go"}}, summary)
    assert table.splitlines()[0] == "| | stock | airlock simulate |"
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
