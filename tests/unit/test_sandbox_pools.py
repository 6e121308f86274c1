"""`airlock sandbox up --pools`: the fake nodes of each pool, what their DRA devices say,
and the NodePool Karpenter launches each pool's nodes from, without starting anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from webhook.pools import parse_spec
from webhook.sandbox import commands
from webhook.sandbox.autoscaling import instance_types, karpenter_objects
from webhook.sandbox.devices import CHANNEL_DRIVER, GPU_DRIVER, resource_slices
from webhook.sandbox.nodes import BLOCK_LABEL, CLIQUE_LABEL, GPU, Shape, shape_of, topology
from webhook.sandbox.options import add_sandbox_arguments

PRODUCT, COUNT, MEMORY = "nvidia.com/gpu.product", "nvidia.com/gpu.count", "nvidia.com/gpu.memory"
MIXED = Shape(pools=parse_spec("h100=4x8/2,l4=2x1,a100=2x8/1"))


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sandbox_arguments(parser)
    return parser.parse_args(["up", *argv])


def by_name(shape: Shape) -> dict[str, dict[str, Any]]:
    return {n["metadata"]["name"]: n for n in topology(shape)}


# node -> its model's labels, GPUs, NVLink domain and block (None: no NVLink)
NODES: list[tuple[str, str, str, str, int, str | None, str | None]] = [
    ("h100-0000", "NVIDIA-H100-80GB-HBM3", "8", "81559", 8, "clique-0", "block-0"),
    ("h100-0003", "NVIDIA-H100-80GB-HBM3", "8", "81559", 8, "clique-1", "block-0"),
    ("l4-0000", "NVIDIA-L4", "1", "23034", 1, None, None),
    ("l4-0001", "NVIDIA-L4", "1", "23034", 1, None, None),
    # The a100's domains come after the h100's: none is shared between pools.
    ("a100-0000", "NVIDIA-A100-SXM4-80GB", "8", "81920", 8, "clique-2", "block-1"),
    ("a100-0001", "NVIDIA-A100-SXM4-80GB", "8", "81920", 8, "clique-3", "block-1"),
]


@pytest.mark.parametrize(("name", "product", "count", "memory", "gpus", "clique", "block"),
                         NODES, ids=[n[0] for n in NODES])
def test_each_pool_labels_its_nodes_with_its_model_and_topology(
        name: str, product: str, count: str, memory: str, gpus: int, clique: str | None,
        block: str | None) -> None:
    node = by_name(MIXED)[name]
    labels = node["metadata"]["labels"]
    assert (labels[PRODUCT], labels[COUNT], labels[MEMORY]) == (product, count, memory)
    assert (labels.get(CLIQUE_LABEL), labels.get(BLOCK_LABEL)) == (clique, block)
    assert node["status"]["allocatable"][GPU] == str(gpus)
    assert {"key": GPU, "value": "present", "effect": "NoSchedule"} in node["spec"]["taints"]


def test_every_pool_is_made_whole_and_in_order() -> None:
    assert list(by_name(MIXED)) == [*(f"h100-{i:04d}" for i in range(4)),
                                    "l4-0000", "l4-0001", "a100-0000", "a100-0001"]


def test_a_pools_file_sets_each_nodes_capacity_and_extra_labels(tmp_path: Path) -> None:
    path = tmp_path / "pools.json"
    path.write_text(json.dumps({"pools": [
        {"name": "serve", "model": "l40s", "count": 1, "gpusPerNode": 4, "cpu": "48",
         "memory": "384Gi", "labels": {"example.com/tier": "serving"}}]}))
    (node,) = topology(shape_of(parse("--pools", str(path))))
    assert node["metadata"]["name"] == "serve-0000"
    assert node["metadata"]["labels"]["example.com/tier"] == "serving"
    assert {k: node["status"]["capacity"][k] for k in ("cpu", "memory", GPU)} == \
        {"cpu": "48", "memory": "384Gi", GPU: "4"}


def test_the_uniform_flags_are_one_pool_labelled_as_before() -> None:
    node = by_name(shape_of(parse("--nodes", "8", "--gpus-per-node", "4")))["gpu-0007"]
    labels = node["metadata"]["labels"]
    assert (labels[CLIQUE_LABEL], labels[BLOCK_LABEL]) == ("clique-1", "block-0")
    assert (labels[PRODUCT], labels[COUNT]) == ("NVIDIA-H100-80GB-HBM3", "4")
    assert node["status"]["allocatable"][GPU] == "4"


@pytest.mark.parametrize(("argv", "said"), [
    (("--pools", "l4=2x1", "--nodes", "4"), "--pools describes every GPU node: drop --nodes"),
    (("--pools", "l4=2x1", "--gpus-per-node", "4", "--nodes-per-domain", "2"),
     "drop --gpus-per-node, --nodes-per-domain"),
    (("--nodes", "0"), "--domains-per-block: pool 1 (gpu) count: Input should be greater than"),
])
def test_up_refuses_flags_that_contradict_each_other_before_building_anything(
        argv: tuple[str, ...], said: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert commands.up(parse(*argv, "--state-dir", str(tmp_path / "sandbox"))) == 2
    assert said in capsys.readouterr().err


def test_a_bad_pools_spec_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("--pools", "l4=2x1/2")
    assert "NVIDIA-L4 has no NVLink" in capsys.readouterr().err


def slices_of(shape: Shape, name: str) -> dict[str, dict[str, Any]]:
    node = by_name(shape)[name]
    node["metadata"]["uid"] = f"uid-{name}"
    return {s["spec"]["driver"]: s["spec"] for s in resource_slices(node)}


def test_with_dra_each_pools_devices_are_of_its_model() -> None:
    dra = Shape(pools=MIXED.pools, dra=True)
    h100, l4 = slices_of(dra, "h100-0000"), slices_of(dra, "l4-0001")
    assert GPU not in by_name(dra)["l4-0001"]["status"]["allocatable"]
    assert [d["attributes"]["productName"] for d in h100[GPU_DRIVER]["devices"]] == \
        [{"string": "NVIDIA H100 80GB HBM3"}] * 8
    (device,) = l4[GPU_DRIVER]["devices"]
    assert device["attributes"]["productName"] == {"string": "NVIDIA L4"}
    assert device["attributes"]["architecture"] == {"string": "Ada Lovelace"}
    assert device["capacity"]["memory"] == {"value": "23034Mi"}
    # IMEX channels only where there is NVLink between nodes.
    assert CHANNEL_DRIVER in h100
    assert CHANNEL_DRIVER not in l4


def test_karpenter_launches_each_pool_from_a_node_pool_of_its_own() -> None:
    pools = {o["metadata"]["name"]: o["spec"]["template"] for o in karpenter_objects(MIXED)
             if o["kind"] == "NodePool"}
    assert list(pools) == ["h100", "l4", "a100"]
    wanted = {name: t["spec"]["requirements"][0]["values"] for name, t in pools.items()}
    assert wanted == {"h100": ["h100-8x-h100"], "l4": ["l4-1x-l4"], "a100": ["a100-8x-a100"]}
    labels = {name: t["metadata"]["labels"] for name, t in pools.items()}
    assert labels["l4"][PRODUCT] == "NVIDIA-L4"
    assert CLIQUE_LABEL not in labels["l4"]
    assert (labels["h100"][CLIQUE_LABEL], labels["a100"][CLIQUE_LABEL]) == \
        ("karpenter-clique-0", "karpenter-clique-1")
    offered = {t["name"]: t["resources"][GPU] for t in json.loads(instance_types(MIXED))}
    assert offered == {"h100-8x-h100": "8", "l4-1x-l4": "1", "a100-8x-a100": "8"}


def test_the_uniform_sandbox_keeps_its_node_pool_and_instance_type() -> None:
    (pool,) = [o for o in karpenter_objects(Shape()) if o["kind"] == "NodePool"]
    assert pool["metadata"]["name"] == "gpu"
    assert pool["spec"]["template"]["spec"]["requirements"][0]["values"] == ["gpu-8x-h100"]
    assert pool["spec"]["template"]["metadata"]["labels"][CLIQUE_LABEL] == "karpenter-clique-0"
    (offered,) = json.loads(instance_types(Shape()))
    assert offered["offerings"][0]["Price"] == 98.32
