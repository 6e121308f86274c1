"""What NVIDIA's DRA driver (k8s-dra-driver-gpu) would publish for a fake node, for
`airlock sandbox up --dra`: its DeviceClasses, and per node a ResourceSlice of whole GPUs
(driver gpu.nvidia.com) and one of IMEX channels (compute-domain.nvidia.com). Beside
them, what a NIC driver (dranet, driver dra.net) publishes: a node's RDMA NICs, one per
GPU under the same PCIe root, as an HGX board wires them.

A fake node has no kubelet and so no kubelet plugin to publish them; these slices stand
in for that hardware as KWOK's nodes stand in for the machines. The names, attributes and
CEL selectors are the driver's own, so a ResourceClaim written for a real cluster selects
the same devices here, and kube-scheduler's DRA plugin (not anything here) allocates them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from webhook.devices.kinds import PCIE_ROOT
from webhook.kuberaw import json_of
from webhook.pools import BY_KEY, CLIQUE_LABEL, COUNT_LABEL, PRODUCT_LABEL, family

GPU_DRIVER = "gpu.nvidia.com"
CHANNEL_DRIVER = "compute-domain.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
CHANNEL_CLASS = "compute-domain-default-channel.nvidia.com"
NIC_DRIVER = "dra.net"
NIC_CLASS = "dranet"
# What the driver reports besides a GPU's model: fixed, as on a fleet kept on one driver.
DRIVER_VERSION = "570.133.20"
CUDA_DRIVER_VERSION = "12.8.0"
# Each device's uuid is derived from its node and index, so a slice made again (a node
# recreated) names the same GPUs.
_UUIDS = uuid.UUID("6f0b3c2e-6d7a-4c52-9a55-2b8e3f1c0a17")


@dataclass(frozen=True, slots=True)
class Model:
    """A GPU model as NVML names it, and what the driver derives from it."""

    product_name: str
    architecture: str
    compute_capability: str  # a semantic version, as the driver publishes it
    memory: str


def model(product_label: str) -> Model:
    """The model behind GFD's label (`NVIDIA-H100-80GB-HBM3`: NVML's `NVIDIA H100 80GB
    HBM3`, Hopper, 9.0, 80Gi). Its memory is the label's; a label without one (`NVIDIA-L4`)
    gets its family's, an unknown family Hopper's traits and 80Gi."""
    label = product_label or BY_KEY["h100"].product
    gpu = family(label)
    size = re.search(r"(\d+)GB", label.upper())
    memory = f"{size.group(1)}Gi" if size else f"{gpu.memory_mib}Mi" if gpu else "80Gi"
    traits = gpu or BY_KEY["h100"]
    return Model(product_name=label.replace("-", " "), architecture=traits.architecture,
                 compute_capability=traits.compute_capability, memory=memory)


def device_classes() -> list[dict[str, Any]]:
    """The classes the driver's Helm chart installs for GPUs and IMEX channels, with its
    selectors. mig.nvidia.com selects nothing here: no MIG device is published."""
    def device_class(name: str, expression: str) -> dict[str, Any]:
        return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
                "metadata": {"name": name},
                "spec": {"selectors": [{"cel": {"expression": expression}}]}}

    def typed(driver: str, kind: str) -> str:
        return f"device.driver == '{driver}' && device.attributes['{driver}'].type == '{kind}'"

    return [device_class(GPU_CLASS, typed(GPU_DRIVER, "gpu")),
            device_class(MIG_CLASS, typed(GPU_DRIVER, "mig")),
            device_class(CHANNEL_CLASS, typed(CHANNEL_DRIVER, "channel")
                         + f" && device.attributes['{CHANNEL_DRIVER}'].id == 0"),
            device_class(NIC_CLASS, f"device.driver == '{NIC_DRIVER}' && "
                         f"device.attributes['{NIC_DRIVER}'].rdma == true")]


def _root(index: int) -> str:
    """An HGX board's layout: two GPUs, and their two NICs, behind each PCIe switch."""
    return f"pci0000:{0x10 + 0x10 * (index // 2):02x}"


def nic_device(index: int) -> dict[str, Any]:
    """An RDMA NIC as dranet publishes one: its interface, PCI address and root."""
    return {"name": f"pci-0000-{0x1a + 0x10 * index:02x}-00-0", "attributes": {
        "rdma": {"bool": True},
        "ifName": {"string": f"ib{index}"},
        "pciVendor": {"string": "Mellanox Technologies"},
        "resource.kubernetes.io/pciBusID": {"string": f"0000:{0x1a + 0x10 * index:02x}:00.0"},
        PCIE_ROOT: {"string": _root(index)},
    }}


def gpu_device(node: str, index: int, gpu: Model) -> dict[str, Any]:
    """A whole GPU as the driver's gpu kubelet plugin publishes it (`gpu-<minor>`)."""
    return {"name": f"gpu-{index}", "attributes": {
        "type": {"string": "gpu"},
        "uuid": {"string": f"GPU-{uuid.uuid5(_UUIDS, f'{node}/{index}')}"},
        "minor": {"int": index},
        "index": {"int": index},
        "productName": {"string": gpu.product_name},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": gpu.compute_capability},
        "driverVersion": {"version": DRIVER_VERSION},
        "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
        "pcieBusID": {"string": f"0000:{0x18 + 0x10 * index:02x}:00.0"},
        PCIE_ROOT: {"string": _root(index)},
    }, "capacity": {"memory": {"value": gpu.memory}}}


def _slice(node: dict[str, Any], driver: str, devices: list[dict[str, Any]]
           ) -> dict[str, Any]:
    """One slice holding the node's whole pool for `driver`, owned by the node so that
    deleting the node deletes it, as the kubelet plugin's slices are."""
    meta = node["metadata"]
    return {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
        "metadata": {"name": f"{meta['name']}-{driver}", "ownerReferences": [{
            "apiVersion": "v1", "kind": "Node", "name": meta["name"], "uid": meta["uid"],
            "controller": True}]},
        "spec": {"driver": driver, "nodeName": meta["name"],
                 "pool": {"name": meta["name"], "generation": 1, "resourceSliceCount": 1},
                 "devices": devices},
    }


def resource_slices(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The slices of a node the API returned (its uid set): as many whole GPUs of its
    product as its labels say, an RDMA NIC beside each, and, on a node in an NVLink
    domain, the compute-domain plugin's first IMEX channel (the driver runs that plugin
    only where IMEX is: nodes GPU feature discovery gives a clique label; an L4 node has
    none)."""
    name = node["metadata"]["name"]
    labels = node["metadata"].get("labels") or {}
    gpu, gpus = model(labels.get(PRODUCT_LABEL, "")), int(labels.get(COUNT_LABEL, "0"))
    channel = {"name": "channel-0", "attributes": {"type": {"string": "channel"},
                                                   "id": {"int": 0}}}
    return [_slice(node, GPU_DRIVER, [gpu_device(name, i, gpu) for i in range(gpus)]),
            _slice(node, NIC_DRIVER, [nic_device(i) for i in range(gpus)]),
            *([_slice(node, CHANNEL_DRIVER, [channel])] if CLIQUE_LABEL in labels else [])]


async def create_device_classes(api: client.ApiClient) -> None:
    """The classes, once per cluster (409: already there)."""
    resource = client.ResourceV1Api(api)
    for body in device_classes():
        try:
            await json_of(await resource.create_device_class(body=body,
                                                             _preload_content=False))
        except ApiException as e:
            if e.status != 409:
                raise


async def create_slices(api: client.ApiClient, node: dict[str, Any]) -> None:
    """The node's slices, one after the other: the caller runs many nodes at a time."""
    resource = client.ResourceV1Api(api)
    for body in resource_slices(node):
        await json_of(await resource.create_resource_slice(body=body, _preload_content=False))
