"""The policy model: what one `gpu-airlock.io/v1alpha1` file may say, and the merged
policy the webhook decides with.

Every field a platform engineer writes is declared here, with a description that
becomes the JSON Schema editors validate against and the policy reference in docs/.
"""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from fractions import Fraction
from typing import Annotated, Any, Literal, TypeVar, cast

from pydantic import AfterValidator, Field, field_validator, model_validator

from webhook.accelerators import Accelerators, name_problem
from webhook.devices.kinds import DeviceKind, resource_of
from webhook.keys import (
    API_VERSION,
    CLASSES,
    CONTROLLER_IDENTITY,
    DEFAULT_SCHEDULER,
    SYSTEM_NAMESPACE,
    ClassName,
)
from webhook.policy.capacity import CapacitySpec
from webhook.policy.classes import (
    ClassSpec,
    PriorityClassSpec,
    TopologyPlacement,
    preemption_problems,
)
from webhook.policy.devices import DeviceClassMapping, device_class_problems
from webhook.policy.fields import NAME, Toleration, is_label_key
from webhook.policy.fields import Strict as _Strict
from webhook.policy.gpumodels import GpuModel, model_problems
from webhook.policy.grants import Grant, grant_problems
from webhook.policy.queues import FairShareSpec, PreemptionSpec, Queue, model_quota_problems
from webhook.policy.rules import Match, Rule
from webhook.policy.slices import GpuSlices, Slice
from webhook.policy.sources import Loc

T = TypeVar("T")


class TopologyLevel(_Strict):
    name: str = Field(description="The name classes refer to, e.g. nvlink, block, host.")
    node_label: str = Field(alias="nodeLabel", description="The node label naming the domain.")

    @field_validator("name")
    @classmethod
    def _level_name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"{v!r}: level names are lowercase letters, digits, '-' and '.'")
        return v

    @field_validator("node_label")
    @classmethod
    def _label_key(cls, v: str) -> str:
        if not is_label_key(v):
            raise ValueError(f"{v!r} is not a valid node label key")
        return v


class NamespaceAccess(_Strict):
    namespaces: tuple[str, ...] = Field(description="Shell-style globs; the first entry "
                                        "whose globs match a namespace decides for it.")
    classes: tuple[ClassName, ...] = Field(description="Classes pods there may use.")


def _accelerator(name: str) -> str:
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


class Scope(_Strict):
    excluded_namespaces: tuple[str, ...] = Field(
        (),
        alias="excludedNamespaces",
        description="Never touched, in addition to kube-system and airlock-system.",
    )
    schedulers: tuple[str, ...] = Field(
        (),
        description="Scheduler names Airlock handles, in addition to default-scheduler.",
    )
    accelerators: tuple[Annotated[str, AfterValidator(_accelerator)], ...] = Field(
        (),
        description="Extended resources that make a pod a GPU pod (e.g. amd.com/gpu, "
        "aws.amazon.com/neuron); the controller counts exactly these. The resources "
        "`gpuSlices` offers are added to them.",
    )


class Admission(_Strict):
    gate_removers: tuple[str, ...] = Field(
        (),
        alias="gateRemovers",
        description="Usernames allowed to remove Airlock's gate, in addition to the "
        "controller's service account.",
    )


class PolicySpec(_Strict):
    """What one file contributes. Files merge: see `webhook.policy.merging`."""

    scope: Scope | None = Field(None, description="What Airlock touches at all.")
    topology_levels: tuple[TopologyLevel, ...] = Field(
        (), alias="topologyLevels", description="Named levels of the topology, by node label.")
    classes: dict[ClassName, ClassSpec] = Field(
        default_factory=dict, description="What each class gets: training, inference, "
        "scavenger.")
    rules: tuple[Rule, ...] = Field(
        (), description="Ordered classification rules; the first that matches decides.")
    namespace_access: tuple[NamespaceAccess, ...] = Field(
        (), alias="namespaceAccess",
        description="Which classes a namespace may use; first match wins; unmatched "
        "namespaces may use every class.")
    grants: tuple[Grant, ...] = Field(
        (), description="Namespaces whose pods may ask for a class that `requiresGrant`, or "
        "keep a PriorityClass above their class's; grants from every file add up.")
    admission: Admission | None = Field(None, description="Admission settings.")
    gpu_models: tuple[GpuModel, ...] = Field(
        (), alias="gpuModels", description="The GPU models the cluster mixes, by the node "
        "labels that tell them apart; models from every file add up, "
        "each defined once. See docs/gpu-models.md.")
    queues: tuple[Queue, ...] = Field(
        (), description="Team queues with GPU quotas; queues from every file add up.")
    fair_share: FairShareSpec | None = Field(
        None, alias="fairShare", description="How usage is remembered for the order of "
        "admission (defined in one file at most).")
    preemption: PreemptionSpec | None = Field(
        None, description="When and how waiting gangs evict running work (defined in one "
        "file at most).")
    gpu_slices: GpuSlices | None = Field(
        None, alias="gpuSlices",
        description="Fractions of a GPU the cluster offers (MIG profiles, shared GPUs), "
        "which pods ask for by annotation; see docs/fractional-gpus.md.")
    device_classes: tuple[DeviceClassMapping, ...] = Field(
        (), alias="deviceClasses",
        description="DeviceClasses whose devices pods claim through Dynamic Resource "
        "Allocation, and what they count as; mappings from every file add up, each class "
        "mapped once. See docs/dra.md.")
    capacity: CapacitySpec | None = Field(
        None, description="Asking the cluster to grow for gangs that fit no domain of "
        "today's nodes (defined in one file at most). See docs/autoscaling.md.")
    default_class: ClassName | None = Field(
        None, alias="defaultClass",
        description="The class of a GPU pod that no rule classifies and that is in no gang "
        "(defined in one file at most). Absent: such a pod keeps its own priority and is "
        "neither gated nor tolerated.")


class Metadata(_Strict):
    name: str = Field(description="Unique across the policy files.")


class PolicyFile(_Strict):
    """One YAML document of a policy file; a file may hold several."""

    api_version: Literal["gpu-airlock.io/v1alpha1"] = Field(
        alias="apiVersion", description="The policy format version.")
    kind: Literal["AirlockPolicy"] = Field(description="Always `AirlockPolicy`.")
    metadata: Metadata = Field(description="Names the document in error messages.")
    spec: PolicySpec = Field(description="What this document contributes to the policy.")


def dangling_references(
    classes: Mapping[ClassName, ClassSpec], levels: Collection[str], rules: Sequence[Rule]
) -> Iterator[tuple[ClassName | int, Loc, str]]:
    """Each reference to a topology level or class that is not defined: the class's name
    (or the rule's index), the path inside that class (or rule), and the message. The
    merger turns the path into a `file:line`; the model only needs the message."""
    known = ", ".join(levels) or "none defined"
    for cls_name, spec in classes.items():
        used: list[tuple[str, str, Loc]] = []
        if spec.topology:
            used.append((spec.topology.level, "topology.level", ("topology", "level")))
        if spec.placement != "none":
            used.append((spec.placement_level, "placementLevel", ("placementLevel",)))
        for level, field, loc in used:
            if level not in levels:
                yield cls_name, loc, (f"class {cls_name}: {field} {level!r} is not one of the "
                                      f"topologyLevels ({known})")
    for i, rule in enumerate(rules):
        if rule.class_ not in classes:
            yield i, ("class",), (f"rule {rule.name}: class {rule.class_} is not defined "
                                  f"under spec.classes in any policy file")


def missing_classes(classes: Collection[ClassName]) -> str | None:
    """Why the classes are incomplete, or None. A pod may ask for any class with the class
    label, and a gang member no rule matches is training: each class needs a definition
    even if no rule gives it."""
    missing = [c for c in CLASSES if c not in classes]
    if not missing:
        return None
    return (f"spec.classes defines no {' or '.join(missing)} in any file; every class "
            f"({', '.join(CLASSES)}) needs a definition")


BUILTIN_EXCLUDED: frozenset[str] = frozenset({"kube-system", SYSTEM_NAMESPACE})
DEFAULT_ACCELERATORS: tuple[str, ...] = ("nvidia.com/gpu",)


class Policy(_Strict):
    """The merged policy the webhook decides with. The defaults are what holds before any
    file contributes: the merger adds to them."""

    classes: dict[ClassName, ClassSpec]
    excluded_namespaces: frozenset[str] = BUILTIN_EXCLUDED
    schedulers: frozenset[str] = frozenset({DEFAULT_SCHEDULER})
    accelerators: tuple[str, ...] = DEFAULT_ACCELERATORS
    topology_levels: Annotated[dict[str, str], Field(
        default_factory=dict, description="level name -> node label")]
    rules: tuple[Rule, ...] = ()
    namespace_access: tuple[NamespaceAccess, ...] = ()
    grants: tuple[Grant, ...] = ()
    gate_removers: frozenset[str] = frozenset({CONTROLLER_IDENTITY})
    gpu_models: tuple[GpuModel, ...] = ()
    queues: tuple[Queue, ...] = ()
    fair_share: FairShareSpec = FairShareSpec()
    preemption: PreemptionSpec = PreemptionSpec()
    capacity: CapacitySpec = CapacitySpec()
    slices: tuple[Slice, ...] = ()
    device_classes: tuple[DeviceClassMapping, ...] = ()
    default_class: ClassName | None = None
    sources: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _slices_are_accelerators(cls, data: Any) -> Any:
        """An offered slice is an accelerator: a pod that requests it is a GPU pod."""
        if not isinstance(data, dict) or not data.get("slices"):
            return data
        offered = [s["resource"] if isinstance(s, dict) else s.resource
                   for s in data["slices"]]
        named = data.get("accelerators", DEFAULT_ACCELERATORS)
        return {**data, "accelerators": tuple(dict.fromkeys([*named, *offered]))}

    @model_validator(mode="after")
    def _device_classes(self) -> Policy:
        problems = [message for _, _, message in device_class_problems(
            self.device_classes, self.topology_levels, self.accelerators)]
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @model_validator(mode="after")
    def _references(self) -> Policy:
        errors = [message for _, _, message in
                  dangling_references(self.classes, self.topology_levels, self.rules)]
        errors += [message for _, _, message in preemption_problems(self.classes)]
        errors += [message for _, _, message in grant_problems(self.classes, self.grants)]
        errors += [message for _, _, message in model_problems(self.gpu_models)]
        errors += [message for _, _, message in model_quota_problems(
            self.queues, [m.name for m in self.gpu_models])]
        incomplete = missing_classes(self.classes)
        if incomplete:
            errors.append(incomplete)
        if errors:
            raise ValueError("; ".join(errors))
        return self

    def allowed_classes(self, namespace: str) -> tuple[ClassName, ...]:
        for access in self.namespace_access:
            if any(fnmatch.fnmatchcase(namespace, g) for g in access.namespaces):
                return access.classes
        return CLASSES

    def derived(self, name: str, make: Callable[[Policy], T]) -> T:
        """`make(self)`, made once: the rules compiled for classification, say, which run
        on every admission request. A policy never changes; a reload makes a new one."""
        found = self._derivations.get(name)
        if found is None:
            found = self._derivations[name] = make(self)
        return cast(T, found)

    @functools.cached_property
    def _derivations(self) -> dict[str, Any]:
        # Kept in the instance's own dictionary: a pydantic private attribute is read
        # through __getattr__, a fifth of a classification.
        return {}

    def granted(self, cls: ClassName, namespace: str) -> bool:
        """Whether pods of `namespace` may ask for `cls` themselves (`requiresGrant`)."""
        return not self.classes[cls].requires_grant or any(
            grant.class_ == cls and any(fnmatch.fnmatchcase(namespace, g)
                                        for g in grant.namespaces)
            for grant in self.grants)

    def granted_to(self, cls: ClassName) -> tuple[str, ...]:
        """The namespace globs granted `cls`."""
        return tuple(g for grant in self.grants if grant.class_ == cls
                     for g in grant.namespaces)

    def priority_granted(self, priority_class: str, namespace: str) -> bool:
        """Whether pods of `namespace` may keep `priority_class` (no class's) above their
        class's priority."""
        return any(priority_class in grant.priority_classes
                   and any(fnmatch.fnmatchcase(namespace, g) for g in grant.namespaces)
                   for grant in self.grants)

    def queued(self, cls: ClassName) -> bool:
        """Whether single pods of the class queue (gangs always do)."""
        return self.classes[cls].queues_singles(cls)

    @property
    def shares(self) -> dict[str, Fraction]:
        """The share of a GPU one device of each offered slice, and of each DeviceClass
        counted as an accelerator, is."""
        return {**{s.resource: s.share for s in self.slices},
                **{resource_of(d.name): d.share for d in self.device_classes
                   if d.accelerator is not None}}

    @functools.cached_property
    def gpu_resources(self) -> frozenset[str]:
        """What makes a pod a GPU pod: the accelerators, and the resources that stand for
        the devices of the DeviceClasses counted as one. Kept: every review asks."""
        return frozenset((*self.accelerators, *(
            resource_of(d.name) for d in self.device_classes if d.accelerator is not None)))

    @functools.cached_property
    def device_kinds(self) -> dict[str, DeviceKind]:
        """The DeviceClasses policy maps, by name, in the order a device is matched."""
        kinds = {d.name: d.kind() for d in self.device_classes}
        for mapping in self.device_classes:
            if (pairs := mapping.aligned_kind()) is not None:
                kinds[pairs.device_class] = pairs
        return kinds

    def counted(self) -> Accelerators:
        """What this policy counts as GPUs, and how much: its accelerators, slices and
        DeviceClasses."""
        return Accelerators.of(self.gpu_resources, self.shares)

    def priority_class_owner(self, priority_class_name: str) -> ClassName | None:
        for cls_name, spec in self.classes.items():
            if spec.priority_class.name == priority_class_name:
                return cls_name
        return None


__all__ = [
    "API_VERSION",
    "ClassSpec",
    "Grant",
    "Match",
    "NamespaceAccess",
    "Policy",
    "PolicyFile",
    "PolicySpec",
    "PriorityClassSpec",
    "Rule",
    "Toleration",
    "TopologyLevel",
    "TopologyPlacement",
]
