"""The sandbox's Kubernetes releases and `--dra`'s devices, without building or starting
anything: which release a flag or $AIRLOCK_KUBERNETES picks, that each is cached apart,
and what the fake nodes publish in place of NVIDIA's DRA driver."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from webhook.devices.kinds import PCIE_ROOT
from webhook.sandbox import commands
from webhook.sandbox.binaries import (
    DEFAULT_RELEASE,
    KUBERNETES,
    KUBERNETES_ENV,
    RELEASES,
    UnknownRelease,
    kubernetes_release,
    kubernetes_tool,
)
from webhook.sandbox.devices import (
    CHANNEL_CLASS,
    CHANNEL_DRIVER,
    GPU_CLASS,
    GPU_DRIVER,
    MIG_CLASS,
    NIC_CLASS,
    NIC_DRIVER,
    device_classes,
    model,
    resource_slices,
)
from webhook.sandbox.nodes import CLIQUE_LABEL, GPU, Shape, topology
from webhook.sandbox.options import add_sandbox_arguments


def test_each_minor_pins_a_patch_release_its_staging_modules_and_its_etcd() -> None:
    assert {m: (r.version, r.staging, r.etcd) for m, r in RELEASES.items()} == {
        "1.34": ("v1.34.4", "v0.34.4", "v3.6.4"),
        "1.35": ("v1.35.4", "v0.35.4", "v3.6.5"),
        "1.36": ("v1.36.3", "v0.36.3", "v3.6.8"),
        "1.37": ("v1.37.2", "v0.37.2", "v3.7.0"),
    }
    directories = {kubernetes_tool(r).directory.name for r in RELEASES.values()}
    assert len(directories) == len(RELEASES)  # one build cache per release
    # The default keeps the cache it always had: no rebuild for anyone on upgrade.
    assert kubernetes_tool(DEFAULT_RELEASE).recipe == KUBERNETES.recipe
    assert "-X k8s.io/component-base/version.gitVersion=v1.37.2" in \
        kubernetes_tool(RELEASES["1.37"]).ldflags
    assert "-X k8s.io/component-base/version.gitMinor=37" in \
        kubernetes_tool(RELEASES["1.37"]).ldflags


def test_the_flag_then_the_variable_then_the_default_choose_the_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KUBERNETES_ENV, raising=False)
    assert kubernetes_release() == DEFAULT_RELEASE == RELEASES["1.34"]
    monkeypatch.setenv(KUBERNETES_ENV, "1.37")
    assert kubernetes_release().version == "v1.37.2"
    assert kubernetes_release("1.35").version == "v1.35.4"
    assert kubernetes_release("v1.36.3") == kubernetes_release("v1.36") == RELEASES["1.36"]
    with pytest.raises(UnknownRelease, match=r"'1.33'.*1.34, 1.35, 1.36, 1.37"):
        kubernetes_release("1.33")
    monkeypatch.setenv(KUBERNETES_ENV, "1.38")
    with pytest.raises(UnknownRelease, match=r"AIRLOCK_KUBERNETES"):
        kubernetes_release()


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_sandbox_arguments(parser)
    return parser.parse_args(["up", *argv])


def test_up_takes_a_release_and_dra(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--kubernetes", "1.37", "--dra")
    assert (args.kubernetes, args.dra) == (RELEASES["1.37"], True)
    assert (parse().kubernetes, parse().dra) == (None, False)
    with pytest.raises(SystemExit):
        parse("--kubernetes", "1.29")
    assert "is not one the sandbox pins" in capsys.readouterr().err


def test_up_refuses_dra_with_mig_nodes_before_building_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parse("--dra", "--mig", "1g.10gb=7", "--state-dir", str(tmp_path / "sandbox"))
    assert commands.up(args) == 2
    assert "--dra" in capsys.readouterr().err


def created(shape: Shape) -> list[dict[str, object]]:
    """The nodes as the apiserver returns them: with a uid."""
    nodes = topology(shape)
    for i, node in enumerate(nodes):
        node["metadata"]["uid"] = f"uid-{i}"
    return nodes


def test_dra_nodes_keep_labels_and_taint_but_offer_no_extended_resource() -> None:
    plain, dra = topology(Shape(nodes=1)), topology(Shape(nodes=1, dra=True))
    assert GPU in plain[0]["status"]["allocatable"]
    assert GPU not in dra[0]["status"]["allocatable"]
    assert GPU not in dra[0]["status"]["capacity"]
    assert dra[0]["metadata"]["labels"] == plain[0]["metadata"]["labels"]
    assert dra[0]["metadata"]["labels"][CLIQUE_LABEL] == "clique-0"
    assert dra[0]["spec"] == plain[0]["spec"]


def test_each_node_publishes_its_gpus_nics_and_an_imex_channel_in_pools_of_its_own() -> None:
    node = topology(Shape(nodes=1, gpus_per_node=4, dra=True))[0]
    node["metadata"]["uid"] = "uid-0"
    gpus, nics, channels = resource_slices(node)
    for made, driver in ((gpus, GPU_DRIVER), (nics, NIC_DRIVER), (channels, CHANNEL_DRIVER)):
        assert made["spec"]["driver"] == driver
        assert made["spec"]["nodeName"] == "gpu-0000"
        assert made["spec"]["pool"] == {"name": "gpu-0000", "generation": 1,
                                        "resourceSliceCount": 1}
        assert made["metadata"]["ownerReferences"][0]["uid"] == "uid-0"
    assert [d["name"] for d in gpus["spec"]["devices"]] == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    attributes = gpus["spec"]["devices"][3]["attributes"]
    assert attributes["type"] == {"string": "gpu"}
    assert attributes["index"] == attributes["minor"] == {"int": 3}
    assert attributes["architecture"] == {"string": "Hopper"}
    assert attributes["driverVersion"]["version"].count(".") == 2
    assert len({d["attributes"]["pcieBusID"]["string"] for d in gpus["spec"]["devices"]}) == 4
    assert [d["name"] for d in channels["spec"]["devices"]] == ["channel-0"]
    # A NIC beside each GPU, two of each under each of two PCIe roots.
    def roots(made: dict[str, Any]) -> list[str]:
        return [d["attributes"][PCIE_ROOT]["string"] for d in made["spec"]["devices"]]
    assert roots(nics) == roots(gpus) == ["pci0000:10", "pci0000:10", "pci0000:20",
                                          "pci0000:20"]
    assert all(d["attributes"]["rdma"] == {"bool": True} for d in nics["spec"]["devices"])
    # The same node made again publishes the same GPUs.
    assert resource_slices(node) == [gpus, nics, channels]


def test_the_device_classes_select_with_the_drivers_own_expressions() -> None:
    classes = {c["metadata"]["name"]: c["spec"]["selectors"][0]["cel"]["expression"]
               for c in device_classes()}
    assert classes == {
        GPU_CLASS: "device.driver == 'gpu.nvidia.com' && "
                   "device.attributes['gpu.nvidia.com'].type == 'gpu'",
        MIG_CLASS: "device.driver == 'gpu.nvidia.com' && "
                   "device.attributes['gpu.nvidia.com'].type == 'mig'",
        CHANNEL_CLASS: "device.driver == 'compute-domain.nvidia.com' && "
                       "device.attributes['compute-domain.nvidia.com'].type == 'channel' && "
                       "device.attributes['compute-domain.nvidia.com'].id == 0",
        NIC_CLASS: "device.driver == 'dra.net' && device.attributes['dra.net'].rdma == true",
    }


@pytest.mark.parametrize(("label", "name", "arch", "memory"), [
    ("NVIDIA-H100-80GB-HBM3", "NVIDIA H100 80GB HBM3", "Hopper", "80Gi"),
    ("NVIDIA-A100-SXM4-40GB", "NVIDIA A100 SXM4 40GB", "Ampere", "40Gi"),
    # No size in the label: its family's, as GPU feature discovery's memory label has it.
    ("NVIDIA-GB200", "NVIDIA GB200", "Blackwell", "183359Mi"),
    ("NVIDIA-L4", "NVIDIA L4", "Ada Lovelace", "23034Mi"),
    ("NVIDIA-L40S", "NVIDIA L40S", "Ada Lovelace", "46068Mi"),
    # A family the catalogue does not know: Hopper's traits and 80Gi.
    ("NVIDIA-Tesla-T4", "NVIDIA Tesla T4", "Hopper", "80Gi"),
])
def test_a_gpu_is_described_by_the_nodes_product_label(label: str, name: str, arch: str,
                                                       memory: str) -> None:
    gpu = model(label)
    assert (gpu.product_name, gpu.architecture, gpu.memory) == (name, arch, memory)
