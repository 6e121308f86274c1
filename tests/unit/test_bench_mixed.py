"""The mixed-cluster bench (`python -m bench.simulate --mixed`): its trace names models its
pods fit, and its checks, read from the run's own binds, count a gang split over models and
a pod bound off its models."""

from __future__ import annotations

import dataclasses

from bench.simulate.landings import Landings
from bench.simulate.mixed import (
    CLUSTER,
    NAMING,
    measure,
    mixed_policy,
    model_sizes,
    name_models,
)
from tests.builders import GPU_MODELS, PRODUCT, PRODUCTS, make_policy
from webhook.controller.core.deciding import DecideOptions
from webhook.policy.queues import Queue
from webhook.pools import read_pools
from webhook.simulation.clusters import Shape
from webhook.simulation.generating import Mix, generate
from webhook.simulation.traces import Job

LABELS = {"h-0": {PRODUCT: PRODUCTS["h100"]}, "a-0": {PRODUCT: PRODUCTS["a100"]},
          "l-0": {PRODUCT: PRODUCTS["l4"]}, "cpu-0": {}}


def _landings() -> Landings:
    queue = Queue.model_validate({"name": "team-a", "namespaces": ["team-a"], "models": [
        {"model": "h100", "nominal": 8}, {"model": "a100", "nominal": 8}]})
    return Landings(make_policy(gpu_models=GPU_MODELS, queues=(queue,)), LABELS)


def _job(name: str, pods: int, namespace: str = "team-a", *models: str) -> Job:
    return Job(name, 0.0, namespace, "training", pods, 8, 60.0, gpu_models=models)


def test_a_gang_split_over_two_models_straddles_and_its_pod_off_its_model_counts() -> None:
    landings = _landings()
    split = _job("split", 2, "team-a", "h100")
    landings.bound(split, 0, "split-0", "h-0")
    landings.bound(split, 0, "split-1", "a-0")
    assert landings.straddling == [("team-a", "split", 0)]
    assert landings.off_models == [("team-a/split-1", "a100", ("h100",))]


def test_a_gang_on_one_model_per_attempt_and_pods_on_allowed_models_count_nothing() -> None:
    landings = _landings()
    moved = _job("moved", 2)
    for attempt, node in enumerate(("h-0", "a-0")):
        landings.bound(moved, attempt, f"moved-{attempt}-0", node)
        landings.bound(moved, attempt, f"moved-{attempt}-1", node)
    # No queue, no names: any model, and nodes of none.
    landings.bound(_job("free", 1, "elsewhere"), 0, "free-0", "cpu-0")
    landings.bound(_job("free", 1, "elsewhere"), 0, "free-0", "l-0")
    assert (landings.straddling, landings.off_models, landings.binds) == ([], [], 6)


def test_a_pod_off_its_queues_models_counts_though_it_names_none() -> None:
    landings = _landings()
    landings.bound(_job("small", 1), 0, "small-0", "l-0")
    assert landings.off_models == [("team-a/small-0", "l4", ("h100", "a100"))]


def test_a_third_of_the_jobs_name_models_whose_nodes_hold_their_pods() -> None:
    pools, policy = read_pools(CLUSTER), mixed_policy()
    sizes = model_sizes(pools, policy)
    assert len(sizes) >= 10
    assert {p.gpus_per_node for p in pools} == {1, 2, 4, 8}
    assert sum(p.count for p in pools) >= 1000
    generated = generate(Mix(jobs=600, seed=3, max_pods=16))
    jobs = name_models(generated, sizes, seed=3)
    named = [j for j in jobs if j.gpu_models]
    assert len(named) == round(len(jobs) * NAMING)
    assert all(sizes[m][0] >= j.gpus for j in named for m in j.gpu_models)
    assert [dataclasses.replace(j, gpu_models=()) for j in jobs] == generated
    assert name_models(generated, sizes, seed=3) == jobs


def test_a_small_mixed_day_keeps_every_gang_on_one_model_and_every_pod_on_its_own() -> None:
    pools, policy = read_pools(CLUSTER), mixed_policy()
    generated = generate(Mix(jobs=300, seconds=1800.0, seed=5, max_pods=16))
    jobs = name_models(generated, model_sizes(pools, policy), seed=5)
    measured = measure(jobs, policy, Shape(pools=pools), DecideOptions(), 1800.0, check=True)
    landings = measured.landings
    assert landings is not None
    assert landings.binds >= sum(j.pods for j in jobs)
    assert measured.run.summary()["completed"] == len(jobs)
    assert (landings.straddling, landings.off_models) == ([], [])
    assert len(landings.gangs) >= 50
