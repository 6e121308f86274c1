"""Simulated elastic and sliced jobs: an elastic job runs once its minimum is bound and
goes faster as more of its pods join; a sliced job waits for room where every slice fits
one domain of its level."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from tests.builders import BLOCK, CLIQUE, make_policy
from webhook.policy.model import Policy
from webhook.simulation.clusters import Shape
from webhook.simulation.runs import Scheduler
from webhook.simulation.simulating import simulate
from webhook.simulation.traces import Job

TWO_NODES = Shape(nodes=2, gpus_per_node=8, nodes_per_domain=2)
# Two blocks, each of two NVLink domains of 3 nodes.
TWO_BLOCKS = Shape(nodes=12, gpus_per_node=8, nodes_per_domain=3, domains_per_block=2)


def job(name: str, submit: float, pods: int, runtime: float, **more: Any) -> Job:
    return dataclasses.replace(Job(name, submit, "ml", "training", pods, 8, runtime),
                               **more)


def completed(jobs: list[Job], policy: Policy, shape: Shape,
              scheduler: Scheduler = "airlock") -> dict[str, float | None]:
    run = simulate(jobs, policy, shape, scheduler)
    return {t.name: t.completed for t in run.timelines}


@pytest.mark.parametrize("scheduler", ["airlock", "stock"])
def test_an_elastic_job_starts_with_its_minimum_and_speeds_up_as_pods_join(
        policy: Policy, scheduler: Scheduler) -> None:
    # One node is busy until 100. The elastic job (2 pods, minimum 1) runs from 1 at half
    # pace: 49.5 of its 100 s done by 100, when its second pod joins; 50.5 s more.
    jobs = [job("first", 0, 1, 100), job("elastic", 1, 2, 100, min_pods=1)]
    assert completed(jobs, policy, TWO_NODES, scheduler) == {"first": 100, "elastic": 150.5}


def test_a_job_that_is_not_elastic_waits_for_all_its_pods(policy: Policy) -> None:
    jobs = [job("first", 0, 1, 100), job("whole", 1, 2, 100)]
    assert completed(jobs, policy, TWO_NODES) == {"first": 100, "whole": 200}


def test_a_sliced_job_waits_for_a_block_where_each_slice_fits_one_domain() -> None:
    # Block 0 busy until 100 (a gang filling each of its domains); in block 1 a gang of
    # 2 in each domain until 300, one node left free in each. A gang of 2 in slices of
    # 2 needs both pods in one domain: it waits for block 0. Without slices it runs at
    # once, across block 1's two domains.
    policy = make_policy(topology_levels={"nvlink": CLIQUE, "block": BLOCK,
                                          "host": "kubernetes.io/hostname"})
    busy = [job("b0d0", 0, 3, 100), job("b0d1", 0, 3, 100), job("x", 0, 2, 300),
            job("y", 0, 2, 300)]
    sliced = job("sliced", 1, 2, 10, required_topology="block", slice_topology="nvlink",
                 slice_size=2)
    plain = dataclasses.replace(sliced, name="plain", slice_topology=None, slice_size=None)
    assert completed([*busy, sliced], policy, TWO_BLOCKS)["sliced"] == 110
    assert completed([*busy, plain], policy, TWO_BLOCKS)["plain"] == 11


def test_an_elastic_job_counts_the_gpus_its_pods_held_not_all_of_its_pods(
        policy: Policy) -> None:
    # "first" holds 8 GPUs for 100 s; "elastic" one pod from 1 to 150.5 and the other from
    # 100: 8 x 149.5 + 8 x 50.5 GPU-seconds, not 2 pods x 8 GPUs for all of its run.
    jobs = [job("first", 0, 1, 100), job("elastic", 1, 2, 100, min_pods=1)]
    assert simulate(jobs, policy, TWO_NODES, "airlock").summary()["gpuSeconds"] == \
        800 + 8 * 149.5 + 8 * 50.5
