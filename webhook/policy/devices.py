"""GPUs claimed through Dynamic Resource Allocation, in policy: `spec.deviceClasses` maps
a DeviceClass to the accelerator its devices count as, and names the devices that are its
(the driver that publishes them and the attributes that set them apart), since Airlock
does not evaluate a DeviceClass's CEL selectors. See docs/dra.md."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from fractions import Fraction

from pydantic import Field, field_validator

from webhook.devices.kinds import (
    PCIE_ROOT,
    AttributeValue,
    DeviceKind,
    aligned_class,
    qualified,
)
from webhook.policy.fields import Strict
from webhook.policy.slices import Share
from webhook.policy.sources import Loc

# A DeviceClass's name, and a driver's: DNS subdomains.
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# An attribute's name, with or without its domain.
_ATTRIBUTE = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


class DeviceClassMapping(Strict):
    """A DeviceClass whose devices pods claim through `spec.resourceClaims`."""

    name: str = Field(description="The DeviceClass's name, as claims write it in "
                      "`deviceClassName` (e.g. gpu.nvidia.com).")
    accelerator: str | None = Field(
        None, description="The accelerator its devices count as, one of "
        "`scope.accelerators` (e.g. nvidia.com/gpu): a pod that claims one is a GPU pod, "
        "and quotas and fair share count it. Absent: its devices are not GPUs (an IMEX "
        "channel, a NIC), and count only for where a pod fits.")
    share: Share = Field(Fraction(1), description="The share of a GPU one device is (`1/7` "
                         "for a 1g MIG device of an H100); 1 by default.")
    driver: str | None = Field(
        None, description="The DRA driver that publishes the class's devices in its "
        "ResourceSlices; by default the class's name (NVIDIA's and AMD's convention).")
    attributes: dict[str, AttributeValue] = Field(
        default_factory=dict, description="Attributes a device must have to be the "
        "class's, e.g. `{type: gpu}`; names without a domain are the driver's. What the "
        "DeviceClass's selectors say, for Airlock, which does not run CEL.")
    topology: str | None = Field(
        None, description="A topology level: the pods of a gang that claim this class "
        "must share one domain of it (required, never only preferred). NVIDIA's "
        "ComputeDomain channels need the gang in one NVLink domain.")

    align_with: str | None = Field(
        None, alias="alignWith", description="A GPU DeviceClass (mapped here, with an "
        "accelerator) whose devices this class's (a NIC) are kept beside: in a claim that "
        "asks for as many of each, the webhook pairs each GPU with a device of this class "
        "under one value of `alignAttribute`, as claim constraints the scheduler enforces, "
        "and the controller counts only nodes where that many such pairs are free.")
    align_attribute: str = Field(
        PCIE_ROOT, alias="alignAttribute", description="The attribute, with its domain, "
        "paired devices share: by default the PCIe root complex "
        "(`resource.kubernetes.io/pcieRoot`).")

    @field_validator("name", "driver", "align_with")
    @classmethod
    def _subdomain(cls, v: str | None) -> str | None:
        if v is not None and (not _SUBDOMAIN.match(v) or len(v) > 253):
            raise ValueError(f"{v!r} is not a DNS subdomain (lowercase letters, digits, "
                             f"'-' and '.')")
        return v

    @field_validator("align_attribute")
    @classmethod
    def _qualified_attribute(cls, v: str) -> str:
        if "/" not in v or not _ATTRIBUTE.match(v):
            raise ValueError(f"{v!r} is not an attribute name with its domain "
                             f"(e.g. {PCIE_ROOT})")
        return v

    @field_validator("attributes")
    @classmethod
    def _attribute_names(cls, v: dict[str, AttributeValue]) -> dict[str, AttributeValue]:
        for name in v:
            if not _ATTRIBUTE.match(name):
                raise ValueError(f"{name!r} is not an attribute name")
        return v

    def kind(self) -> DeviceKind:
        driver = self.driver or self.name
        return DeviceKind(self.name, driver,
                          {qualified(k, driver): v for k, v in self.attributes.items()},
                          gpu=self.accelerator is not None, level=self.topology)

    def aligned_kind(self) -> DeviceKind | None:
        """The pairs of a GPU and one of this class's devices, as a kind of their own."""
        if self.align_with is None:
            return None
        name = aligned_class(self.align_attribute, (self.align_with, self.name))
        return DeviceKind(name, "", gpu=False,
                          pairs=(self.align_with, self.name, self.align_attribute))


def device_class_problems(mappings: tuple[DeviceClassMapping, ...], levels: Collection[str],
                          accelerators: Collection[str]) -> Iterator[tuple[int, Loc, str]]:
    """References no single mapping can check: its accelerator and its topology level.
    Each as (index, path inside the mapping, message), for the merger's `file:line`."""
    for i, mapping in enumerate(mappings):
        if mapping.accelerator is not None and mapping.accelerator not in accelerators:
            yield i, ("accelerator",), (
                f"device class {mapping.name}: accelerator {mapping.accelerator!r} is not one "
                f"of scope.accelerators ({', '.join(accelerators)})")
        if mapping.align_with is not None and not any(
                other.name == mapping.align_with and other.accelerator is not None
                for other in mappings):
            yield i, ("alignWith",), (
                f"device class {mapping.name}: alignWith {mapping.align_with!r} is not a "
                f"device class mapped here as a GPU (with an accelerator)")
        if mapping.topology is not None and mapping.topology not in levels:
            yield i, ("topology",), (
                f"device class {mapping.name}: topology {mapping.topology!r} is not one of the "
                f"topologyLevels ({', '.join(levels) or 'none defined'})")
