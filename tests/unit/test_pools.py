"""Node pools as a command line and a file say them: what each gives, and what is refused
with a message that says what is wrong."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import pool_entry
from webhook.pools import (
    MAX_NODES,
    PoolError,
    family,
    layout,
    parse_spec,
    pools_of,
    read_pools,
    validated,
)

H100, A100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB", "NVIDIA-L4"

# spec -> (name, product, nodes, GPUs a node, nodes a domain) per pool
SPECS: list[tuple[str, list[tuple[str, str, int, int, int | None]]]] = [
    ("h100=8x8,a100=8x8,l4=4x1",
     [("h100", H100, 8, 8, 4), ("a100", A100, 8, 8, 4), ("l4", L4, 4, 1, None)]),
    ("h100=16x8/2", [("h100", H100, 16, 8, 2)]),
    (" l40s=3x4 , b200=2x8/1 ", [("l40s", "NVIDIA-L40S", 3, 4, None),
                                  ("b200", "NVIDIA-B200", 2, 8, 1)]),
    ("h200=1x16/1024", [("h200", "NVIDIA-H200", 1, 16, 1024)]),
]


@pytest.mark.parametrize(("spec", "pools"), SPECS, ids=[s for s, _ in SPECS])
def test_a_spec_gives_a_pool_per_model(
        spec: str, pools: list[tuple[str, str, int, int, int | None]]) -> None:
    assert [(p.name, p.product, p.count, p.gpus_per_node, p.nodes_per_domain)
            for p in parse_spec(spec)] == pools


BAD_SPECS = [
    ("h100=8", "is not MODEL=NODESxGPUS[/NODES_PER_DOMAIN]"),
    ("h100=8x8,", "'' is not MODEL=NODESxGPUS"),
    ("H100=8x8", "'H100=8x8' is not MODEL=NODESxGPUS"),
    ("v100=8x8", "pool 1 (v100): model 'v100' is not one of b200, h200, h100, a100, l40s, l4"),
    ("h100=0x8", "pool 1 (h100) count: Input should be greater than or equal to 1"),
    ("h100=10001x8", "pool 1 (h100) count: Input should be less than or equal to 10000"),
    ("h100=2x0", "pool 1 (h100) gpusPerNode: Input should be greater than or equal to 1"),
    ("h100=2x17", "pool 1 (h100) gpusPerNode: Input should be less than or equal to 16"),
    ("h100=2x8/0", "pool 1 (h100) nodesPerDomain: Input should be greater than or equal to 1"),
    ("h100=2x8/1025", "nodesPerDomain: Input should be less than or equal to 1024"),
    ("l4=2x1/2", "pool 1 (l4): NVIDIA-L4 has no NVLink: nodesPerDomain must be null"),
    ("h100=2x8,h100=1x8", "pool names are unique: h100 more than once"),
    ("h100=6000x8,a100=6000x8", "12,000 nodes in all: at most 10,000"),
]


@pytest.mark.parametrize(("spec", "said"), BAD_SPECS, ids=[s for s, _ in BAD_SPECS])
def test_a_bad_spec_says_what_is_wrong(spec: str, said: str) -> None:
    with pytest.raises(PoolError) as e:
        parse_spec(spec)
    assert said in str(e.value)
    assert "\n" not in str(e.value)  # one problem, one line


def test_a_file_says_what_a_spec_cannot(tmp_path: Path) -> None:
    path = tmp_path / "pools.yaml"
    path.write_text(yaml.safe_dump({"pools": [
        pool_entry("train", count=4, nodesPerDomain=2, domainsPerBlock=1,
                   labels={"example.com/team": "research"}, cpu="192", memory="2Ti"),
        pool_entry("serve", without=("model",), product="NVIDIA-RTX-PRO-6000",
                   gpusPerNode=4)]}))
    train, serve = read_pools(path)
    assert (train.product, train.count, train.nodes_per_domain, train.domains_per_block) == \
        (H100, 4, 2, 1)
    assert (train.cpu, train.memory) == ("192", "2Ti")
    assert train.node_labels() == {"example.com/team": "research",
                                   "nvidia.com/gpu.product": H100, "nvidia.com/gpu.count": "8",
                                   "nvidia.com/gpu.memory": "81559"}
    # A product the catalogue does not know: no NVLink domains unless said, no memory label.
    assert (serve.product, serve.nodes_per_domain, serve.gpu) == \
        ("NVIDIA-RTX-PRO-6000", None, None)
    assert "nvidia.com/gpu.memory" not in serve.node_labels()


def test_json_is_a_file_too_and_a_path_wins_over_a_spec(tmp_path: Path) -> None:
    path = tmp_path / "l4=2x1"  # a file whose name looks like a spec is still the file
    path.write_text(json.dumps({"pools": [pool_entry("a100", model="a100", count=3)]}))
    assert [(p.name, p.count) for p in pools_of(str(path))] == [("a100", 3)]
    assert [p.name for p in pools_of("l4=2x1,h100=1x8")] == ["l4", "h100"]


# A file's pools, each a variation of pool_entry() -> what the error says
BAD_FILES: list[tuple[str, Any, str]] = [
    ("a misspelt field", {"pools": [pool_entry(gpusPerNod=8)]},
     "pool 1 (h100) gpusPerNod: unknown field; a pool has name, model, product, count, "
     "gpusPerNode, nodesPerDomain"),
    ("neither model nor product", {"pools": [pool_entry(without=("model",))]},
     "pool 1 (h100): a pool names its model (b200, h200, h100, a100, l40s, l4) or its product"),
    ("no count", {"pools": [pool_entry(without=("count",))]},
     "pool 1 (h100) count: Field required"),
    ("a negative count", {"pools": [pool_entry(count=-1)]},
     "count: Input should be greater than or equal to 1"),
    ("a count that is no number", {"pools": [pool_entry(count="many")]},
     "count: Input should be a valid integer"),
    ("a name no node can take", {"pools": [pool_entry("GPU_pool")]},
     "'GPU_pool': a pool's name is lowercase letters, digits and '-'"),
    ("a product no label can hold", {"pools": [pool_entry(product="NVIDIA H100")]},
     "'NVIDIA H100' is not a label value"),
    ("a label the model sets", {"pools": [pool_entry(labels={"nvidia.com/gpu.clique": "x"})]},
     "nvidia.com/gpu.clique is set from the pool's model and topology"),
    ("a bad label key", {"pools": [pool_entry(labels={"-bad": "x"})]},
     "'-bad' is not a label key"),
    ("NVLink on an L40S", {"pools": [pool_entry(model="l40s", nodesPerDomain=2)]},
     "NVIDIA-L40S has no NVLink"),
    ("no CPU", {"pools": [pool_entry(cpu="0")]}, "'0' is not a positive quantity"),
    ("memory that is no quantity", {"pools": [pool_entry(memory="lots")]},
     "'lots' is not a positive quantity"),
    ("the second pool wrong", {"pools": [pool_entry(), pool_entry("l4", model="l4", count=0)]},
     "pool 2 (l4) count"),
    ("no pools", {"pools": []}, "no pools: a cluster has one at least"),
    ("a list, not a mapping", [pool_entry()], "a cluster is a mapping with `pools:`"),
    ("a misspelt top-level key", {"pool": [pool_entry()]},
     "pool: unknown field; a cluster file has `pools:`"),
]


@pytest.mark.parametrize(("raw", "said"), [c[1:] for c in BAD_FILES],
                         ids=[c[0] for c in BAD_FILES])
def test_a_bad_file_says_where_and_what(raw: Any, said: str) -> None:
    with pytest.raises(PoolError) as e:
        validated(raw, "pools.yaml")
    assert said in str(e.value)
    assert str(e.value).startswith("pools.yaml: ")


def test_a_file_that_cannot_be_read_or_parsed_says_so(tmp_path: Path) -> None:
    with pytest.raises(PoolError, match=r"missing\.yaml: cannot read"):
        read_pools(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("pools: [\n")
    with pytest.raises(PoolError, match=r"broken.yaml:2: invalid YAML"):
        read_pools(broken)
    with pytest.raises(PoolError, match="neither a file nor MODEL=NODESxGPUS"):
        pools_of(str(tmp_path / "nowhere.yaml"))


CLUSTER_FILE = """\
pools:
- name: train
  model: h100
  count: 16
  gpusPerNode: 8
- name: serve
  model: l4
  count: 4
  gpusPerNod: 1
  nodesPerDomain: 2
"""


def test_a_cluster_file_names_the_line_of_each_typo(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(CLUSTER_FILE)
    with pytest.raises(PoolError) as e:
        read_pools(path)
    lines = str(e.value).splitlines()
    assert lines[0] == f"{path}:6: pool 2 (serve) gpusPerNode: Field required"
    assert lines[1].startswith(f"{path}:9: pool 2 (serve) gpusPerNod: unknown field;")
    assert len(lines) == 2
    path.write_text(CLUSTER_FILE.replace("gpusPerNod: 1\n  nodesPerDomain: 2",
                                         "gpusPerNode: 1\n  count: 5"))
    with pytest.raises(PoolError, match=r"cluster.yaml:10: duplicate key 'count' \(first at "
                                        r"line 8\)"):
        read_pools(path)
    path.write_text(CLUSTER_FILE + "---\npools: []\n")
    with pytest.raises(PoolError, match=r"cluster.yaml:12: a cluster file holds one document"):
        read_pools(path)


def test_the_largest_cluster_is_taken_and_one_node_more_is_not() -> None:
    assert sum(p.count for p in parse_spec(f"h100={MAX_NODES - 1}x8,l4=1x1")) == MAX_NODES
    with pytest.raises(PoolError, match="in all"):
        parse_spec(f"h100={MAX_NODES - 1}x8,l4=2x1")


def test_domains_and_blocks_are_numbered_across_pools_and_none_without_nvlink() -> None:
    pools = parse_spec("h100=6x8/2,l4=2x1,a100=3x8/1")
    assert [(n.pool.name, n.index, n.domain, n.block) for n in layout(pools)] == [
        ("h100", 0, 0, 0), ("h100", 1, 0, 0), ("h100", 2, 1, 0), ("h100", 3, 1, 0),
        ("h100", 4, 2, 1), ("h100", 5, 2, 1),
        ("l4", 0, None, None), ("l4", 1, None, None),
        # The a100's domains and blocks follow the h100's: none is shared.
        ("a100", 0, 3, 2), ("a100", 1, 4, 2), ("a100", 2, 5, 3)]


@pytest.mark.parametrize(("product", "key"), [
    ("NVIDIA-H100-80GB-HBM3", "h100"), ("NVIDIA-H100-PCIe", "h100"),
    ("NVIDIA-A100-SXM4-40GB", "a100"), ("NVIDIA-L40S", "l40s"), ("NVIDIA-L4", "l4"),
    ("NVIDIA-GB200", "b200"), ("NVIDIA-Tesla-T4", None)])
def test_a_product_label_is_of_the_family_it_names(product: str, key: str | None) -> None:
    found = family(product)
    assert (found.key if found else None) == key
