"""bench.peers on a mixed cluster, without one: the pools' models and a queue per team as
Airlock's policy says them, Kueue's ResourceFlavors, Topologies and ClusterQueues written
from that policy (quotas, order and fungibility mirrored), and the models a job names as
each system's users write them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from bench.peers.manifests import LOCAL_QUEUE, Attempt, model_affinity, pods
from bench.peers.models import HOSTS_TOPOLOGY, kueue_flavors, models_policy, shares
from tests.paths import ROOT
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.policy.loading import load_policy, policy_files
from webhook.policy.model import Policy
from webhook.pools import PRODUCT_LABEL, pools_of
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, HOST_LABEL, Shape, topology
from webhook.simulation.traces import Job

POOLS = pools_of("h100=8x8/4,a100=4x8/4,l4=4x1")
TEAMS = ["team-a", "team-b", "team-c"]


def _policy(tmp_path: Path, doc: dict[str, Any]) -> Policy:
    path = tmp_path / "96-pool-models.yaml"
    path.write_text(yaml.safe_dump(doc))
    return load_policy([*policy_files(ROOT / "policies"), path])


@pytest.fixture
def mixed(tmp_path: Path) -> Policy:
    return _policy(tmp_path, models_policy(POOLS, TEAMS))


def _kinds(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        assert doc["apiVersion"] == "kueue.x-k8s.io/v1beta2"
        by_kind.setdefault(doc["kind"], []).append(doc)
    return by_kind


def test_shares_split_every_gpu_the_first_teams_one_more() -> None:
    assert shares(64, 3) == [22, 21, 21]
    assert shares(4, 3) == [2, 1, 1]
    assert shares(2, 3) == [1, 1, 0]


def test_airlock_gets_a_model_per_product_and_a_queue_per_team(mixed: Policy) -> None:
    assert [(m.name, m.node_labels) for m in mixed.gpu_models] == [
        ("h100", {PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3"}),
        ("a100", {PRODUCT_LABEL: "NVIDIA-A100-SXM4-80GB"}),
        ("l4", {PRODUCT_LABEL: "NVIDIA-L4"})]
    assert [(q.name, q.namespaces, q.fungibility) for q in mixed.queues] == [
        (team, (team,), "NextModelFirst") for team in TEAMS]
    for model, gpus in (("h100", 64), ("a100", 32), ("l4", 4)):
        assert sum(m.nominal for q in mixed.queues for m in q.models
                   if m.model == model) == gpus
    assert all(m.borrowing_limit is None and m.lending_limit is None
               for q in mixed.queues for m in q.models)


def test_a_kueue_flavor_per_model_selects_the_nodes_the_sandbox_labels(
        mixed: Policy) -> None:
    by_kind = _kinds(kueue_flavors(mixed, POOLS))
    flavors = {f["metadata"]["name"]: f["spec"] for f in by_kind["ResourceFlavor"]}
    assert list(flavors) == ["h100", "a100", "l4"]
    nodes = topology(Shape(pools=POOLS))
    for name, spec in flavors.items():
        selected = {n["metadata"]["name"] for n in nodes
                    if spec["nodeLabels"].items() <= n["metadata"]["labels"].items()}
        assert selected == {n["metadata"]["name"] for n in nodes
                            if n["metadata"]["name"].startswith(f"{name}-")}
    levels = {t["metadata"]["name"]: [level["nodeLabel"] for level in t["spec"]["levels"]]
              for t in by_kind["Topology"]}
    # The L4 nodes have no NVLink domain or block label: a Topology of hosts alone.
    assert levels[flavors["h100"]["topologyName"]] == [BLOCK_LABEL, CLIQUE_LABEL, HOST_LABEL]
    assert flavors["a100"]["topologyName"] == flavors["h100"]["topologyName"]
    assert flavors["l4"]["topologyName"] == HOSTS_TOPOLOGY
    assert levels[HOSTS_TOPOLOGY] == [HOST_LABEL]


def test_kueue_queues_mirror_airlocks_quotas_order_and_fungibility(mixed: Policy) -> None:
    by_kind = _kinds(kueue_flavors(mixed, POOLS))
    queues = {q["metadata"]["name"]: q["spec"] for q in by_kind["ClusterQueue"]}
    assert list(queues) == [f"{team}-gpus" for team in TEAMS]
    (cohort,) = by_kind["Cohort"]
    for queue in mixed.queues:
        spec = queues[f"{queue.name}-gpus"]
        assert spec["cohortName"] == cohort["metadata"]["name"]
        (group,) = spec["resourceGroups"]
        assert group["coveredResources"] == ["nvidia.com/gpu"]
        assert [(f["name"], f["resources"]) for f in group["flavors"]] == [
            (m.model, [{"name": "nvidia.com/gpu", "nominalQuota": m.nominal}])
            for m in queue.models]
        # NextModelFirst: the next model within quota before borrowing this one.
        assert spec["flavorFungibility"] == {"whenCanBorrow": "TryNextFlavor",
                                             "whenCanPreempt": "TryNextFlavor"}
        assert spec["namespaceSelector"]["matchExpressions"][0]["values"] == [queue.name]
    assert {(q["metadata"]["namespace"], q["metadata"]["name"], q["spec"]["clusterQueue"])
            for q in by_kind["LocalQueue"]} == {
        (team, LOCAL_QUEUE, f"{team}-gpus") for team in TEAMS}


def test_borrow_first_and_limits_reach_kueue_as_its_users_say_them(tmp_path: Path) -> None:
    doc = models_policy(POOLS[:2], ["team-a"])
    (queue,) = doc["spec"]["queues"]
    queue["fungibility"] = "BorrowFirst"
    queue["models"][0] |= {"borrowingLimit": 8, "lendingLimit": 16}
    (spec,) = [d["spec"] for d in kueue_flavors(_policy(tmp_path, doc), POOLS[:2])
               if d["kind"] == "ClusterQueue"]
    assert spec["flavorFungibility"]["whenCanBorrow"] == "MayStopSearch"
    assert spec["resourceGroups"][0]["flavors"][0]["resources"] == [
        {"name": "nvidia.com/gpu", "nominalQuota": 64, "borrowingLimit": 8,
         "lendingLimit": 16}]
    assert [d["metadata"]["name"] for d in kueue_flavors(_policy(tmp_path, doc), POOLS[:2])
            if d["kind"] == "Topology"] == ["gpu-topology"]


def test_the_models_a_job_names_are_an_affinity_for_the_peers_and_a_key_for_airlock(
        mixed: Policy) -> None:
    job = Job("ft", 0.0, "team-a", "training", 2, 8, 100.0, gpu_models=("a100", "h100"),
              node_selector=(("example.com/zone", "a"),))
    affinity = model_affinity(job, mixed)
    assert affinity is not None
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In",
                                   "values": ["NVIDIA-A100-SXM4-80GB"]}]},
            {"matchExpressions": [{"key": PRODUCT_LABEL, "operator": "In",
                                   "values": ["NVIDIA-H100-80GB-HBM3"]}]}]}
    for system in ("stock", "coscheduling", "kueue"):
        (pod, _) = pods(system, Attempt(job, 0), mixed)
        assert pod["spec"]["affinity"]["nodeAffinity"] == affinity["nodeAffinity"]
        assert pod["spec"]["nodeSelector"] == {"example.com/zone": "a"}
    (pod, _) = pods("airlock", Attempt(job, 0), mixed)
    assert "affinity" not in pod["spec"]
    assert pod["spec"]["nodeSelector"] == {"example.com/zone": "a"}
    assert pod["metadata"]["annotations"][GPU_MODELS_ANNOTATION] == "a100,h100"
    plain = Job("web", 0.0, "team-a", "inference", 1, 1, 10.0)
    assert model_affinity(plain, mixed) is None
    assert "nodeSelector" not in pods("stock", Attempt(plain, 0), mixed)[0]["spec"]
