"""Which devices are a DeviceClass's, as policy maps it (`spec.deviceClasses`), and the
resource each mapped class counts as.

Airlock does not evaluate a DeviceClass's CEL selectors: policy names the driver that
publishes the class's devices and the attributes that set them apart (NVIDIA's driver
publishes whole GPUs and MIG devices alike, told apart by `type`). A device counts for the
first kind it matches."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

# A DeviceClass's devices as a resource: never a name a device plugin advertises.
PREFIX: Final = "dra.gpu-airlock.io/"

AttributeValue = str | int | bool
# The standard attribute for a PCI device's PCIe root complex (Kubernetes' DRA helpers,
# k8s.io/dynamic-resource-allocation/deviceattribute), which GPU and NIC drivers publish
# so that a claim can keep devices under one root.
PCIE_ROOT: Final = "resource.kubernetes.io/pcieRoot"


def resource_of(device_class: str) -> str:
    """The resource the devices of `device_class` count as, on pods and on nodes."""
    return PREFIX + device_class


def aligned_class(attribute: str, classes: Iterable[str]) -> str:
    """The name a set of devices of several classes kept under one value of `attribute`
    counts as, as if it were a class: one unit is one device of each (a GPU and its NIC)."""
    return "+".join(sorted(classes)) + "@" + attribute


def qualified(name: str, driver: str) -> str:
    """An attribute name with its domain: unqualified names are the driver's own."""
    return name if "/" in name else f"{driver}/{name}"


@dataclass(frozen=True, slots=True)
class DeviceKind:
    """A DeviceClass policy maps: the devices that are its, whether they are GPUs (and
    what share of one a device is), and the topology level every pod of a gang claiming
    one must share."""

    device_class: str
    driver: str
    # Qualified attribute name -> the value a device must have.
    attributes: Mapping[str, AttributeValue] = field(default_factory=dict)
    gpu: bool = True
    level: str | None = None
    # For an aligned set (`aligned_class`), the classes kept together and the attribute
    # they share, in that order; such a kind matches no device of its own.
    pairs: tuple[str, str, str] | None = None

    @property
    def resource(self) -> str:
        return resource_of(self.device_class)

    def matches(self, driver: str, attributes: Mapping[str, AttributeValue]) -> bool:
        """Whether a device the driver publishes, with these (qualified) attributes, is
        one of this class's."""
        return self.pairs is None and driver == self.driver and all(
            attributes.get(name) == value for name, value in self.attributes.items())
