"""What a cluster offers below a whole GPU (policy `spec.gpuSlices`): MIG profiles, each
an isolated slice with its own memory, and shared GPUs (time-slicing or MPS), one GPU
advertised as several replicas. A pod that asks for GPU memory or a fraction of a GPU
(`gpu-airlock.io/gpu-memory`, `gpu-airlock.io/gpu-fraction`) gets the smallest offer its
class may use that fits, in place of its one whole `nvidia.com/gpu`.

Every offered resource is an accelerator (the policy adds it to `scope.accelerators`), and
the controller counts one device of it as its `share` of a GPU.
"""

from __future__ import annotations

import functools
from fractions import Fraction
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainSerializer,
    WithJsonSchema,
    field_validator,
)

from webhook.accelerators import name_problem
from webhook.keys import CLASSES, ClassName
from webhook.policy.fields import Strict, Toleration
from webhook.quantities import parse_quantity

# The resource a slice replaces: the GPU Operator's whole GPU.
WHOLE_GPU = "nvidia.com/gpu"


def _share(value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, str | int | float | Fraction):
        raise ValueError("a share is a number or a fraction such as 1/7")
    try:
        share = Fraction(value)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"{value!r} is not a number or a fraction such as 1/7") from None
    if not 0 < share <= 1:
        raise ValueError(f"share {value} is not in (0, 1]: a slice is part of one GPU")
    return share


Share = Annotated[
    Fraction, BeforeValidator(_share), PlainSerializer(str),
    WithJsonSchema({"anyOf": [{"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                              {"type": "string", "pattern": r"^\s*\d+\s*/\s*\d+\s*$"}]}),
]


def _quantity_text(value: Any) -> Any:
    # YAML reads `memory: 10000000000` as a number; a quantity may be one.
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else value


def _memory(value: str) -> str:
    try:
        amount = parse_quantity(value)
    except ValueError:
        raise ValueError(f"{value!r} is not a quantity (e.g. 10Gi)") from None
    if amount <= 0:
        raise ValueError(f"memory {value} must be more than zero")
    return value


def _resource(name: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    if name == WHOLE_GPU:
        raise ValueError(f"{WHOLE_GPU} is the whole GPU slices replace; an offer needs a "
                         f"resource of its own (MIG mixed strategy, or time-slicing with "
                         f"renameByDefault): see docs/fractional-gpus.md")
    return name


class _Offer(Strict):
    resource: Annotated[str, AfterValidator(_resource)] = Field(
        description="The extended resource the device plugin advertises for this slice.")
    memory: Annotated[str, BeforeValidator(_quantity_text), AfterValidator(_memory)] = Field(
        description="GPU memory one device of this resource gives, as a quantity; a "
        "`gpu-memory` request fits when it is no more.")
    classes: tuple[ClassName, ...] = Field(
        CLASSES, description="The classes whose pods may be given this slice.")
    node_selector: dict[str, str] = Field(
        default_factory=dict, alias="nodeSelector",
        description="Added to the pod's nodeSelector with the slice, e.g. the MIG "
        "strategy label of the nodes that have it.")
    tolerations: tuple[Toleration, ...] = Field(
        (), description="Added to the pod with the slice, e.g. for tainted MIG nodes.")

    @field_validator("classes")
    @classmethod
    def _some_class(cls, v: tuple[ClassName, ...]) -> tuple[ClassName, ...]:
        if not v:
            raise ValueError("no class may use this slice; list at least one or remove it")
        return v

    @functools.cached_property
    def memory_bytes(self) -> int:
        # Read on every pod that asks for a slice: parsed once.
        return int(parse_quantity(self.memory))


class MigProfile(_Offer):
    """A MIG profile (e.g. `nvidia.com/mig-1g.10gb` under the mixed strategy): an
    isolated part of one GPU, with its own memory and compute."""

    share: Share = Field(description="The part of one GPU a slice is, e.g. `1/7` for "
                         "1g.10gb on an H100 (seven per GPU), `3/7` for 3g.40gb.")


class SharedGpu(_Offer):
    """One GPU advertised as several replicas (time-slicing or MPS, e.g.
    `nvidia.com/gpu.shared`). Replicas share the GPU's memory and faults: `memory` is what
    each may use without starving the others, not a limit Airlock can enforce."""

    replicas: int = Field(ge=1, le=1000, description="Replicas each GPU is advertised as; "
                          "one replica counts as 1/replicas of a GPU.")
    strategy: Literal["time-slicing", "mps"] = Field(
        "time-slicing", description="How the device plugin shares the GPU (for people "
        "and docs; both map the same way).")

    @property
    def share(self) -> Fraction:
        return Fraction(1, self.replicas)


Slice = MigProfile | SharedGpu


class GpuSlices(Strict):
    mig: tuple[MigProfile, ...] = Field(
        (), description="MIG profiles the cluster's nodes advertise (mixed strategy).")
    shared: tuple[SharedGpu, ...] = Field(
        (), description="Shared (time-sliced or MPS) GPU resources.")


__all__ = ["WHOLE_GPU", "GpuSlices", "MigProfile", "SharedGpu", "Slice"]
