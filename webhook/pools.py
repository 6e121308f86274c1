"""Node pools: a cluster as it is, pools of nodes each of one GPU model and one size, for
the sandbox's fake nodes and the simulation's nodes alike.

Two forms, one model. A command line says `h100=16x8/4,l4=4x1`: per pool MODEL=NODESxGPUS
and, after `/`, the nodes of one NVLink domain. A YAML or JSON file says what a line
cannot (a name apart from the model, a product the catalogue does not know, extra labels,
a node's CPU and memory):

    pools:
    - name: train
      model: h100
      count: 16
      gpusPerNode: 8
      nodesPerDomain: 4
      labels: {example.com/team: research}
    - {name: serve, product: NVIDIA-L4, count: 4, gpusPerNode: 1, nodesPerDomain: null}

A pool's nodes carry GPU feature discovery's labels for their model (product, count,
memory); those of a pool with NVLink domains carry a domain and a block too, numbered
across the cluster so no two pools share one.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError, field_validator, model_validator

from webhook.policy.fields import NAME, Strict, is_label_key, is_label_value
from webhook.policy.sources import Document, Loc, PolicyError, read_documents
from webhook.quantities import parse_quantity

# GPU feature discovery's labels, which the GPU operator puts on every GPU node.
PRODUCT_LABEL = "nvidia.com/gpu.product"
COUNT_LABEL = "nvidia.com/gpu.count"
MEMORY_LABEL = "nvidia.com/gpu.memory"
# The NVLink domain (GFD's clique label) and the block of domains side by side (GKE's).
CLIQUE_LABEL = "nvidia.com/gpu.clique"
BLOCK_LABEL = "cloud.google.com/gce-topology-block"
HOST_LABEL = "kubernetes.io/hostname"

# A 5,000-node sandbox is the largest measured; twice that bounds a typo (16x8 read as
# 168) without refusing a cluster anyone runs. No node holds more than 16 GPUs.
MAX_NODES = 10_000
MAX_GPUS_PER_NODE = 16
MAX_NODES_PER_DOMAIN = 1024
# The uniform flags' domain size, so `h100=16x8` is the cluster `--nodes 16` makes.
DEFAULT_NODES_PER_DOMAIN = 4
# Node names are `<pool>-<index>`, and Karpenter's instance types are named after pools.
_NAME_MAX = 40


@dataclass(frozen=True, slots=True)
class GpuModel:
    """A GPU model as GPU feature discovery labels it and NVIDIA's DRA driver describes it."""

    key: str
    product: str
    architecture: str
    compute_capability: str  # a semantic version, as the DRA driver publishes it
    memory_mib: int  # GFD's nvidia.com/gpu.memory: NVML's total, in MiB
    nvlink: bool


# Ordered so that a product label's first match is its family: L40S before L4.
MODELS = (
    GpuModel("b200", "NVIDIA-B200", "Blackwell", "10.0.0", 183359, nvlink=True),
    GpuModel("h200", "NVIDIA-H200", "Hopper", "9.0.0", 143771, nvlink=True),
    GpuModel("h100", "NVIDIA-H100-80GB-HBM3", "Hopper", "9.0.0", 81559, nvlink=True),
    GpuModel("a100", "NVIDIA-A100-SXM4-80GB", "Ampere", "8.0.0", 81920, nvlink=True),
    GpuModel("l40s", "NVIDIA-L40S", "Ada Lovelace", "8.9.0", 46068, nvlink=False),
    GpuModel("l4", "NVIDIA-L4", "Ada Lovelace", "8.9.0", 23034, nvlink=False),
)
BY_KEY = {m.key: m for m in MODELS}
_BY_PRODUCT = {m.product: m for m in MODELS}


def family(product: str) -> GpuModel | None:
    """The catalogue model whose name a product label contains (`NVIDIA-A100-SXM4-40GB`:
    the A100; `NVIDIA-GB200`: the B200's Blackwell), or None."""
    upper = product.upper()
    return next((m for m in MODELS if m.key.upper() in upper), None)


_NOT_NAME = re.compile(r"[^a-z0-9-]+")


def model_name(product: str) -> str:
    """What a product label's GPUs are called where no policy names them: the catalogue's
    key (`h100`), else the label made a name (`Tesla-T4`: `tesla-t4`), as a pool's name
    and a trace's `gpuModels` name them."""
    known = family(product)
    return known.key if known else _NOT_NAME.sub("-", product.lower()).strip("-") or "gpu"


class PoolError(ValueError):
    """What is wrong with a pools spec or file, every problem on a line of its own."""


class Pool(Strict):
    name: str = Field(description="The pool's name: its nodes are `<name>-0000`, ...")
    model: str | None = Field(None, description="A model of the catalogue (b200, h200, h100, "
                              "a100, l40s, l4): its product label, memory and NVLink.")
    product: str = Field(description="GPU feature discovery's nvidia.com/gpu.product.")
    count: int = Field(ge=1, le=MAX_NODES, description="Nodes in the pool.")
    gpus_per_node: int = Field(alias="gpusPerNode", ge=1, le=MAX_GPUS_PER_NODE)
    nodes_per_domain: int | None = Field(
        alias="nodesPerDomain", ge=1, le=MAX_NODES_PER_DOMAIN,
        description="Nodes per NVLink domain; null: no NVLink between nodes (the default "
        "for models without it and for products the catalogue does not know).")
    domains_per_block: int = Field(2, alias="domainsPerBlock", ge=1, le=MAX_NODES_PER_DOMAIN)
    labels: dict[str, str] = Field(default_factory=dict, description="More node labels.")
    cpu: str = Field("96", description="Each node's CPU capacity.")
    memory: str = Field("1024Gi", description="Each node's memory capacity.")

    @model_validator(mode="before")
    @classmethod
    def _defaults(cls, data: Any) -> Any:
        """A model fills in its product, and its domain size unless one is given; without
        one there is no telling whether the product has NVLink, so no domains."""
        if not isinstance(data, dict):
            return data
        named = data.get("model")
        known = BY_KEY.get(named) if isinstance(named, str) else None
        if isinstance(named, str) and known is None:
            raise ValueError(f"model {named!r} is not one of {', '.join(BY_KEY)} "
                             "(name any other by its product)")
        filled = {**({"product": known.product} if known else {}), **data}
        if "product" not in filled:
            raise ValueError(f"a pool names its model ({', '.join(BY_KEY)}) or its product")
        if "nodesPerDomain" not in data and "nodes_per_domain" not in data:
            filled["nodesPerDomain"] = DEFAULT_NODES_PER_DOMAIN if known and known.nvlink \
                else None
        return filled

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v) or "." in v or len(v) > _NAME_MAX:
            raise ValueError(f"{v!r}: a pool's name is lowercase letters, digits and '-' "
                             f"(at most {_NAME_MAX})")
        return v

    @field_validator("product")
    @classmethod
    def _product(cls, v: str) -> str:
        if not v or not is_label_value(v):
            raise ValueError(f"{v!r} is not a label value (e.g. NVIDIA-H100-80GB-HBM3)")
        return v

    @field_validator("labels")
    @classmethod
    def _labels(cls, v: dict[str, str]) -> dict[str, str]:
        for key, value in v.items():
            if not is_label_key(key):
                raise ValueError(f"{key!r} is not a label key")
            if key.startswith("nvidia.com/gpu.") or key in (BLOCK_LABEL, HOST_LABEL):
                raise ValueError(f"{key} is set from the pool's model and topology")
            if not is_label_value(value):
                raise ValueError(f"{key}: {value!r} is not a label value")
        return v

    @field_validator("cpu", "memory")
    @classmethod
    def _quantity(cls, v: str) -> str:
        try:
            positive = parse_quantity(v) > 0
        except ValueError:
            positive = False
        if not positive:
            raise ValueError(f"{v!r} is not a positive quantity (e.g. 96, 1024Gi)")
        return v

    @model_validator(mode="after")
    def _nvlink(self) -> Pool:
        if self.gpu is not None and not self.gpu.nvlink and self.nodes_per_domain is not None:
            raise ValueError(f"{self.product} has no NVLink: nodesPerDomain must be null")
        return self

    @property
    def gpu(self) -> GpuModel | None:
        """The catalogue's model, named or by its exact product label."""
        return BY_KEY[self.model] if self.model else _BY_PRODUCT.get(self.product)

    @property
    def gpus(self) -> int:
        return self.count * self.gpus_per_node

    def node_labels(self) -> dict[str, str]:
        """The labels every node of the pool carries but its topology's."""
        gpu = self.gpu
        return {**self.labels, PRODUCT_LABEL: self.product,
                COUNT_LABEL: str(self.gpus_per_node),
                **({MEMORY_LABEL: str(gpu.memory_mib)} if gpu else {})}

    def said(self) -> str:
        domains = f", NVLink domains of {self.nodes_per_domain}" \
            if self.nodes_per_domain else ""
        return f"{self.name}: {self.count} x {self.gpus_per_node} {self.product}{domains}"


class _Cluster(Strict):
    pools: tuple[Pool, ...]

    @model_validator(mode="after")
    def _whole(self) -> _Cluster:
        if not self.pools:
            raise ValueError("no pools: a cluster has one at least")
        names = [p.name for p in self.pools]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"pool names are unique: {', '.join(twice)} more than once")
        total = sum(p.count for p in self.pools)
        if total > MAX_NODES:
            raise ValueError(f"{total:,} nodes in all: at most {MAX_NODES:,}")
        return self


def _field_names() -> str:
    return ", ".join(f.alias or name for name, f in Pool.model_fields.items())


def _problems(e: ValidationError, raw: Any) -> Iterator[tuple[Loc, str]]:
    """Each error's place in the file, and what it says: `pool N (name) field: message`."""
    pools = raw.get("pools") if isinstance(raw, dict) else None
    for error in e.errors():
        loc = tuple(error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            message = f"unknown field; a pool has {_field_names()}" if len(loc) > 2 \
                else "unknown field; a cluster file has `pools:`"
        where, rest = "", list(loc)
        if loc[:1] == ("pools",) and len(loc) > 1 and isinstance(loc[1], int):
            i = loc[1]
            named = pools[i].get("name") if isinstance(pools, list) and i < len(pools) \
                and isinstance(pools[i], dict) else None
            where = f"pool {i + 1}" + (f" ({named})" if isinstance(named, str) else "")
            rest = rest[2:]
        field = ".".join(map(str, rest))
        yield loc, (f"{' '.join(filter(None, (where, field)))}: {message}"
                    if where or field else message)


def validated(raw: Any, source: str, document: Document | None = None) -> tuple[Pool, ...]:
    """The pools of a spec or file already read; PoolError naming `source`, and the line
    of each problem where the `document` read from a file knows it."""
    if not isinstance(raw, dict):
        line = f":{document.start_line}" if document else ""
        raise PoolError(f"{source}{line}: a cluster is a mapping with `pools:`, a list of "
                        "pools")
    try:
        return _Cluster.model_validate(raw).pools
    except ValidationError as e:
        raise PoolError("\n".join(
            f"{document.where(loc) if document else source}: {problem}"
            for loc, problem in _problems(e, raw))) from None


_SPEC = re.compile(r"^([a-z0-9]+)=([0-9]{1,9})x([0-9]{1,9})(?:/([0-9]{1,9}))?$")


def parse_spec(text: str) -> tuple[Pool, ...]:
    """`h100=16x8/4,l4=4x1`: a pool per model, named after it."""
    raw = []
    for part in text.split(","):
        match = _SPEC.match(part.strip())
        if match is None:
            raise PoolError(f"{part.strip()!r} is not MODEL=NODESxGPUS[/NODES_PER_DOMAIN] "
                            "(e.g. h100=16x8/4 or l4=4x1)")
        model, nodes, gpus, per = match.groups()
        raw.append({"name": model, "model": model, "count": int(nodes),
                    "gpusPerNode": int(gpus),
                    **({"nodesPerDomain": int(per)} if per is not None else {})})
    return validated({"pools": raw}, repr(text))


def read_pools(path: Path) -> tuple[Pool, ...]:
    """A cluster file's pools: one YAML (or JSON) document; PoolError as `file:line:
    message`, every problem on a line of its own."""
    try:
        documents = read_documents(path)
    except PolicyError as e:
        raise PoolError(str(e)) from None
    if len(documents) != 1:
        at = f":{documents[1].start_line}" if documents else ""
        raise PoolError(f"{path}{at}: a cluster file holds one document, a mapping with "
                        f"`pools:`; it has {len(documents)}")
    return validated(documents[0].data, str(path), documents[0])


def pools_of(text: str) -> tuple[Pool, ...]:
    """A command line's pools: a file's, or a spec's."""
    if Path(text).is_file():
        return read_pools(Path(text))
    if "=" in text:
        return parse_spec(text)
    raise PoolError(f"{text!r} is neither a file nor MODEL=NODESxGPUS,... (e.g. h100=16x8/4)")


def pools_argument(text: str) -> tuple[Pool, ...]:
    """`pools_of` as an argparse type."""
    try:
        return pools_of(text)
    except PoolError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


@dataclass(frozen=True, slots=True)
class Placed:
    """One node of a pool: its index in the pool, and its NVLink domain and block (None in
    a pool without NVLink), numbered across the cluster."""

    pool: Pool
    index: int
    domain: int | None
    block: int | None


def layout(pools: Sequence[Pool]) -> Iterator[Placed]:
    """Every node, pool after pool, in the pools' order."""
    domains = blocks = 0
    for pool in pools:
        per = pool.nodes_per_domain
        if per is None:
            yield from (Placed(pool, i, None, None) for i in range(pool.count))
            continue
        for i in range(pool.count):
            yield Placed(pool, i, domains + i // per,
                         blocks + i // per // pool.domains_per_block)
        made = -(-pool.count // per)
        domains += made
        blocks += -(-made // pool.domains_per_block)
