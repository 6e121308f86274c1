"""What each class of pod gets: its PriorityClass, tolerations, topology, and whether its
pods queue or may be asked for (`ClassSpec`, under `spec.classes`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Literal, TypeVar

from pydantic import Field, field_validator

from webhook.policy.fields import NAME, Strict, Toleration
from webhook.policy.queues import Duration
from webhook.policy.sources import Loc

PreemptionPolicy = Literal["PreemptLowerPriority", "Never"]
TopologyMode = Literal["required", "preferred"]
Name = TypeVar("Name", bound=str)


class PriorityClassSpec(Strict):
    name: str = Field(description="Name of the PriorityClass pods of this class get.")
    value: int = Field(
        ge=-2_147_483_648,
        le=1_000_000_000,
        description="The PriorityClass value (user classes may not exceed 1e9).",
    )
    preemption_policy: PreemptionPolicy = Field(
        "PreemptLowerPriority",
        alias="preemptionPolicy",
        description="`Never` lets the class wait instead of evicting lower-priority pods.",
    )
    override_user: bool = Field(
        False,
        alias="overrideUser",
        description="Replace a priorityClassName the user set. By default Airlock keeps it "
        "and warns.",
    )

    @field_validator("name")
    @classmethod
    def _dns_name(cls, v: str) -> str:
        if not NAME.match(v) or len(v) > 253:
            raise ValueError(f"{v!r} is not a valid PriorityClass name (DNS subdomain)")
        return v


class TopologyPlacement(Strict):
    level: str = Field(description="A level named in `topology.levels`.")
    mode: TopologyMode = Field(
        "preferred",
        description="`required`: the whole gang in one domain of this level or not at all. "
        "`preferred`: the best single domain if one fits, else the gang may span domains.",
    )


class ClassSpec(Strict):
    priority_class: PriorityClassSpec = Field(
        alias="priorityClass", description="The PriorityClass pods of this class get.")
    tolerations: tuple[Toleration, ...] = Field(
        (), description="Added to the pod when it lacks them (e.g. for tainted GPU nodes).")
    topology: TopologyPlacement | None = Field(
        None, description="Where a gang of this class must or should land."
    )
    gate_gangs: bool = Field(
        True,
        alias="gateGangs",
        description="Add the scheduling gate to pods in a gang, so the controller starts "
        "the gang whole.",
    )
    placement: Literal["none", "spread", "pack"] = Field(
        "none",
        description="For single pods: `spread` replicas across domains of `placementLevel` "
        "(resilience), or `pack` them together (free whole nodes for gangs).",
    )
    placement_level: str = Field(
        "host",
        alias="placementLevel",
        description="The topology level `placement` spreads or packs over.",
    )
    queued: bool | None = Field(
        None,
        description="Whether single pods of the class wait in their team's queue (gated, "
        "admitted like a gang of one). Default: true for training and scavenger, false "
        "for inference, where latency matters. Gangs always queue.",
    )
    preempts: bool | None = Field(
        None,
        description="Whether Airlock evicts lower-priority work (whole gangs, cheapest "
        "first, past their minimum runtime, each told why) to make room for the class's "
        "gangs and queued pods. Default: as its PriorityClass's `preemptionPolicy` "
        "(`Never`: no). `true` with `preemptionPolicy: Never` and `queued: true` makes "
        "Airlock the only one that evicts for the class: kube-scheduler's own preemption "
        "evicts one pod at a time, a gang's as readily as any other.",
    )
    preemption_delay: Duration | None = Field(
        None,
        alias="preemptionDelay",
        description="How long a complete gang or queued pod of this class waits for room "
        "before Airlock may evict for it. Default: the policy's `preemption.delay`. Serving "
        "gangs want `0s`: kube-scheduler evicts for a single serving pod at once.",
    )
    requires_grant: bool = Field(
        False,
        alias="requiresGrant",
        description="Whether a pod may ask for this class itself (the `gpu-airlock.io/class` "
        "label, or its PriorityClass by name), where the rules would give it another, only "
        "in namespaces a `grants` entry names. An ask that is not granted is denied (the "
        "label) or replaced by the pod's own class's PriorityClass.",
    )

    def queues_singles(self, name: str) -> bool:
        """Whether single pods of this class, named `name`, queue (gangs always do)."""
        return name != "inference" if self.queued is None else self.queued


def preemption_problems(classes: Mapping[Name, ClassSpec]) -> Iterator[tuple[Name, Loc, str]]:
    """Each class Airlock should evict for whose single pods nobody would make room: the
    class's name, the path inside it, and the message."""
    for name, spec in classes.items():
        if spec.preempts and spec.priority_class.preemption_policy == "Never" and \
                not spec.queues_singles(name):
            yield name, ("preempts",), (
                f"class {name}: preempts: true with priorityClass.preemptionPolicy: Never "
                f"needs queued: true: its single pods would carry no gate, so neither "
                f"Airlock nor kube-scheduler would make room for them")
