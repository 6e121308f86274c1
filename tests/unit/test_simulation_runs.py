"""Simulated runs on small traces: the figures a person reads off them, under Airlock's
own decisions and under the stock scheduler."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tests.builders import with_grant, with_queued
from tests.commands import Done, airlock
from tests.paths import POLICIES, ROOT
from webhook.controller.core.deciding import DecideOptions
from webhook.controller.core.placement.reservation import Order
from webhook.keys import ClassName
from webhook.policy.model import NamespaceAccess, Policy
from webhook.simulation.clusters import Shape
from webhook.simulation.simulating import simulate
from webhook.simulation.timelines import Timeline, summarize
from webhook.simulation.traces import Job

EXAMPLE = ROOT / "bench" / "traces" / "contended.jsonl"
KEYS = {"jobs", "completed", "makespan", "wait", "utilization", "partialGangGpuSeconds",
        "preemptions", "neverRunnable", "namespaces"}
GROUP_KEYS = KEYS - {"makespan", "namespaces"}


def job(name: str, submit: float, cls: ClassName, pods: int, gpus: int, runtime: float,
        namespace: str = "ml") -> Job:
    return Job(name, submit, namespace, cls, pods, gpus, runtime)


# Two nodes of 8 GPUs; one 8-GPU pod runs; then a gang of two 8-GPU pods comes.
CONTENDED = [job("first", 0, "training", 1, 8, 100),
             job("gang", 1, "training", 2, 8, 50, namespace="research")]
TWO_NODES = Shape(nodes=2, gpus_per_node=8, nodes_per_domain=2)


def test_a_gang_that_cannot_fit_waits_whole_under_airlock(policy: Policy) -> None:
    run = simulate(CONTENDED, policy, TWO_NODES, "airlock").summary()
    assert run["partialGangGpuSeconds"] == 0
    assert run["completed"] == 2
    # The gang starts when the first job ends, whole.
    assert run["namespaces"]["research"]["wait"]["p50"] == 99.0
    assert run["makespan"] == 150.0


def test_under_the_stock_scheduler_half_a_gang_holds_its_gpus(policy: Policy) -> None:
    run = simulate(CONTENDED, policy, TWO_NODES, "stock").summary()
    # One pod of the gang sits on the free node from t=1 until the other binds at 100.
    assert run["partialGangGpuSeconds"] == 8 * 99
    assert run["partialGangJobs"] == {"research/gang": 8 * 99}
    assert run["namespaces"]["research"]["wait"]["p50"] == 99.0


HUGE = [job("huge", 0, "training", 3, 8, 10), job("small", 5, "scavenger", 1, 4, 10)]


def test_a_job_larger_than_the_cluster_is_never_runnable_and_the_run_ends(
        policy: Policy) -> None:
    run = simulate(HUGE, policy, TWO_NODES, "airlock").summary()
    assert run["neverRunnable"] == 1
    assert run["completed"] == 1
    assert run["stuck"] == 0
    assert run["partialGangGpuSeconds"] == 0


def test_under_the_stock_scheduler_a_huge_gang_holds_the_cluster_for_ever(
        policy: Policy) -> None:
    run = simulate(HUGE, policy, TWO_NODES, "stock").summary()
    assert run["neverRunnable"] == 1
    # Two of its three pods take both nodes: the scavenger behind it never runs, and the
    # run still ends (at the last event, the scavenger's submit).
    assert run["completed"] == 0
    assert run["stuck"] == 1
    assert run["partialGangGpuSeconds"] == 2 * 8 * 5


def test_required_topology_bigger_than_a_domain_is_never_runnable_under_airlock(
        policy: Policy) -> None:
    # The test policy requires one NVLink domain for training gangs: domains of 2 nodes.
    four = Shape(nodes=4, gpus_per_node=8, nodes_per_domain=2)
    jobs = [job("wide", 0, "training", 3, 8, 10)]
    assert simulate(jobs, policy, four, "airlock").summary()["neverRunnable"] == 1
    stock = simulate(jobs, policy, four, "stock").summary()
    assert stock["neverRunnable"] == 0
    assert stock["completed"] == 1


@pytest.mark.parametrize("inference_needs_a_grant", [False, True])
def test_inference_preempts_training_and_scavengers_never_preempt(
        policy: Policy, inference_needs_a_grant: bool) -> None:
    # A trace states each job's class: the replay runs it whatever grants the policy has.
    if inference_needs_a_grant:
        policy = with_grant(policy, "inference")
    one = Shape(nodes=1, gpus_per_node=8, nodes_per_domain=1)
    jobs = [job("train", 0, "training", 1, 8, 100), job("batch", 1, "scavenger", 1, 8, 10),
            job("serve", 2, "inference", 1, 8, 10)]
    for scheduler in ("airlock", "stock"):
        run = simulate(jobs, policy, one, scheduler)
        figures = run.summary()
        assert figures["preemptions"] == 1, scheduler
        assert figures["lostGpuSeconds"] == 8 * 2, scheduler
        assert figures["completed"] == 3, scheduler
        train = next(t for t in run.timelines if t.name == "train")
        # Started at 0, preempted at 2, back after the scavenger? No: training outranks
        # it, so it runs again as soon as inference is done (12), for its full 100 s.
        assert train.whole == [(0.0, 2.0), (12.0, 112.0)], scheduler
        # The scavenger runs last (112-122); the 2 s thrown away are not use.
        assert figures["makespan"] == 122.0, scheduler
        assert figures["utilization"] == round(8 * (100 + 10 + 10) / (8 * 122), 4)


@pytest.mark.parametrize(("order", "small_waits"), [("backfill", 5.0), ("strict", 995.0)])
def test_the_controllers_own_order_decides(policy: Policy, order: Order, small_waits: float
                                           ) -> None:
    """Six nodes in three NVLink domains, all busy; at 10 one node frees in each of two
    domains. The big gang (16 GPUs in one domain, as the test policy requires) cannot go
    and becomes the head; the small one fits in the domain the head does not keep."""
    six = Shape(nodes=6, gpus_per_node=8, nodes_per_domain=2)
    busy = [job(f"a{i}", 0, "training", 1, 8, 10 if i in (2, 4) else 1000)
            for i in range(6)]
    gangs = [job("big", 5, "training", 2, 8, 100), job("small", 5, "training", 2, 4, 100)]
    run = simulate(busy + gangs, policy, six, "airlock", DecideOptions(order=order))
    waits = {t.name: t.started - t.submit for t in run.timelines if t.started is not None}
    assert waits["small"] == small_waits
    assert waits["big"] == 995.0


def test_a_pending_scavenger_pod_does_not_take_the_room_a_waiting_gang_needs(
        policy: Policy) -> None:
    """`first` and `long` hold both nodes; a 16-GPU gang waits from 1, and a scavenger
    pod from 2. When `first` ends at 100, the node it frees is the gang's, the head of
    the queue: the gang starts when `long` ends, at 200."""
    jobs = [job("first", 0, "training", 1, 8, 100), job("long", 0, "scavenger", 1, 8, 200),
            job("gang", 1, "training", 2, 8, 50), job("grab", 2, "scavenger", 1, 8, 1000)]

    def waits(queued: bool) -> dict[str, float]:
        run = simulate(jobs, with_queued(policy, "scavenger", queued), TWO_NODES, "airlock")
        return {t.name: t.started - t.submit for t in run.timelines if t.started is not None}

    assert waits(queued=True) == {"first": 0.0, "long": 0.0, "gang": 199.0, "grab": 248.0}
    # Were scavenger pods not queued, the one pending would take the freed node at once,
    # and the gang would wait for it too.
    assert waits(queued=False) == {"first": 0.0, "long": 0.0, "gang": 1099.0, "grab": 98.0}


def test_a_job_the_webhook_denies_is_never_runnable(policy: Policy) -> None:
    """Admission is the webhook's own: a class the namespace may not use is denied."""
    restricted = policy.model_copy(update={"namespace_access": (
        NamespaceAccess(namespaces=("guests",), classes=("scavenger",)),)})
    jobs = [job("train", 0, "training", 1, 8, 10, namespace="guests"),
            job("batch", 0, "scavenger", 1, 8, 10, namespace="guests")]
    run = simulate(jobs, restricted, TWO_NODES, "airlock").summary()
    assert run["neverRunnableJobs"] == ["guests/train"]
    assert run["completed"] == 1


def test_the_summary_has_the_contract_keys_per_namespace_too(policy: Policy) -> None:
    run = simulate(CONTENDED, policy, TWO_NODES, "airlock").summary()
    assert run.keys() >= KEYS
    assert {"p50", "p99"} <= run["wait"].keys()
    for figures in run["namespaces"].values():
        assert figures.keys() >= GROUP_KEYS


def test_the_same_trace_gives_the_same_figures(policy: Policy) -> None:
    from webhook.simulation.generating import Mix, generate

    jobs = generate(Mix(jobs=80, seed=5, seconds=3600, max_pods=8))
    shape = Shape(nodes=8, gpus_per_node=8, nodes_per_domain=4)
    for scheduler in ("airlock", "stock"):
        first = simulate(jobs, policy, shape, scheduler)
        again = simulate(jobs, policy, shape, scheduler)
        assert first.summary() == again.summary()


# (pods, holds, whole periods) -> (half-placed, draining) GPU-seconds.
HELD = [
    ("evicted whole, its pods going one by one", 2, [(10.0, 60.0, 4), (10.0, 62.0, 4)],
     [(10.0, 60.0)], 0, 4 * 2),
    ("half placed, then whole, then done apart", 2, [(10.0, 60.0, 4), (20.0, 65.0, 4)],
     [(20.0, 60.0)], 4 * 10, 4 * 5),
    ("never whole", 2, [(10.0, 30.0, 4)], [], 4 * 20, 0),
    ("elastic, grown while whole", 3, [(0.0, 50.0, 4), (0.0, 50.0, 4), (20.0, 50.0, 4)],
     [(0.0, 50.0)], 0, 0),
    ("a single pod", 1, [(0.0, 10.0, 4)], [], 0, 0),
]


@pytest.mark.parametrize(("pods", "holds", "whole", "half_placed", "draining"),
                         [h[1:] for h in HELD], ids=[h[0] for h in HELD])
def test_a_gang_waiting_for_its_rest_is_half_placed_and_one_going_is_draining(
        pods: int, holds: list[tuple[float, float, int]], whole: list[tuple[float, float]],
        half_placed: int, draining: int) -> None:
    t = Timeline("g", "ml", "training", pods, 4, submit=0.0, holds=holds, whole=whole)
    figures = summarize([t], capacity=16)
    assert (figures["partialGangGpuSeconds"], figures["drainingGpuSeconds"]) == \
        (half_placed, draining)


def test_figures_from_timelines_alone() -> None:
    """A real run's pod timelines give the same figures: no simulation needed."""
    gang = Timeline("g", "ml", "training", 2, 4, submit=0.0,
                    holds=[(10.0, 60.0, 4), (20.0, 60.0, 4)], whole=[(20.0, 60.0)],
                    completed=60.0)
    single = Timeline("s", "ml", "scavenger", 1, 8, submit=5.0, holds=[(5.0, 30.0, 8)],
                      whole=[(5.0, 30.0)], completed=30.0)
    figures = summarize([gang, single], capacity=16)
    assert figures["partialGangGpuSeconds"] == 4 * 10
    assert figures["partialGangJobs"] == {"ml/g": 4 * 10}
    assert figures["wait"]["p50"] == 0.0
    assert figures["wait"]["p99"] == 20.0
    assert figures["makespan"] == 60.0
    assert figures["utilization"] == round((8 * 40 + 8 * 25) / (16 * 60), 4)


def _airlock(*args: str) -> Done:
    return airlock("simulate", *args, "--policies", str(POLICIES))


def test_the_command_on_the_example_trace() -> None:
    out = _airlock("--trace", str(EXAMPLE), "--scheduler", "both", "-o", "json")
    assert out.returncode == 0, out.stderr
    runs = json.loads(out.stdout)["runs"]
    assert set(runs) == {"airlock", "stock"}
    for figures in runs.values():
        assert figures.keys() >= KEYS
        assert figures["jobs"] == 60
    assert runs["airlock"]["partialGangGpuSeconds"] == 0
    assert runs["stock"]["partialGangGpuSeconds"] > 0


def test_the_command_on_one_run_prints_one_object_and_text() -> None:
    out = _airlock("--trace", str(EXAMPLE), "-o", "json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout).keys() >= KEYS
    text = _airlock("--trace", str(EXAMPLE))
    assert "partial-gang GPU-hours" in text.stdout


def test_the_command_names_the_bad_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.jsonl"
    trace.write_text(EXAMPLE.read_text().splitlines()[0] + "\n{\n")
    out = _airlock("--trace", str(trace), "-o", "json")
    assert out.returncode == 1
    assert out.stderr.startswith(f"{trace}:2: not JSON")
    assert out.stdout == ""


def test_plots_side_by_side(policy: Policy, tmp_path: Path) -> None:
    from webhook.simulation.plotting import plot

    runs = [simulate(CONTENDED, policy, TWO_NODES, s) for s in ("airlock", "stock")]
    written = plot(runs, tmp_path)
    assert [p.name for p in written] == ["gpus.png", "waits.png", "queue.png"]
    for path in written:
        assert path.read_bytes().startswith(b"\x89PNG")


def test_a_job_that_ends_before_the_head_could_start_is_backfilled(policy: Policy) -> None:
    # Two domains of two nodes. b1 and b2 fill domain 0 for as long as nobody knows; `a`
    # runs in domain 1 from 1 s to 100 s, as it says. The head (a training gang needing a whole
    # domain) keeps domain 1, and could start there at 100: `quick`, expected to end by
    # then, runs on its free node meanwhile; `slow` would delay the head, and waits.
    four = Shape(nodes=4, gpus_per_node=8, nodes_per_domain=2)
    jobs = [job("b1", 0, "training", 1, 8, 1000), job("b2", 0, "training", 1, 8, 1000),
            dataclasses.replace(job("a", 1, "training", 1, 8, 99), expected_runtime=99),
            job("head", 2, "training", 2, 8, 10),
            dataclasses.replace(job("quick", 3, "scavenger", 1, 8, 50), expected_runtime=50),
            dataclasses.replace(job("slow", 3, "scavenger", 1, 8, 50), expected_runtime=500)]
    run = simulate(jobs, policy, four, "airlock")
    started = {t.name: t.started for t in run.timelines}
    assert run.summary()["backfilled"] == 1
    assert started["quick"] == 3.0
    assert started["head"] == 100.0
    assert (started["slow"] or 0) > 100.0
