"""The real control plane for end-to-end tests: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager on loopback, fake GPU nodes run by KWOK, and Airlock's webhook
wired in through the very webhook configurations deploy/ installs. Under CI=true a
missing prerequisite fails the run."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import policy_yaml
from tests.kube import (
    DRA_NODES,
    KARPENTER_POOLS,
    KARPENTER_STATIC,
    MIXED_POOLS,
    Controllers,
    NamespaceFactory,
    NodeFactory,
    PolicyFileFactory,
    Scrapers,
    WiredPlane,
    dra_namespace,
    fresh_namespaces,
    url_reader,
)
from tests.paths import POLICIES
from webhook.policy.loading import load_policy, policy_files
from webhook.sandbox import wiring
from webhook.sandbox.autoscaling import start_karpenter
from webhook.sandbox.binaries import Binaries
from webhook.sandbox.clients import from_kubeconfig, service_account_token
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.nodes import Shape, create_nodes, topology
from webhook.sandbox.operating import stop
from webhook.sandbox.processes import Webhook, start_webhook, webhook_reading


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def control_plane(binaries: Binaries) -> Iterator[ControlPlane]:
    plane = ControlPlane(binaries).start()
    parts = ", ".join(f"{name} {secs:.1f}s" for name, secs in plane.timings.items())
    print(f"control plane ready in {plane.start_seconds:.1f}s ({parts}) at {plane.url}")
    yield plane
    plane.remove()


# The shared plane's nodes: 8 of 8 GPUs in 2 NVLink domains.
NODES = Shape(nodes=8, nodes_per_domain=4)


async def _prepare(plane: ControlPlane, hook: Webhook, shape: Shape = NODES) -> None:
    api = await from_kubeconfig(plane.admin_kubeconfig)
    async with api:
        await wiring.create_namespace(api, "airlock-system")
        await wiring.create_priority_classes(api, load_policy(POLICIES))
        await create_nodes(api, topology(shape))
        await wiring.apply_webhook_configurations(
            api, wiring.webhook_configurations(hook.url, hook.certs.ca.read_bytes()))
        await wiring.apply_admission_policies(api)


@pytest.fixture(scope="session")
def airlock(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory,
            session_policies: Path) -> Iterator[Webhook]:
    """The webhook serving the default policies (a copy: see `session_policies`), wired
    into the control plane, with 8 fake nodes of 8 GPUs in 2 NVLink domains."""
    hook = start_webhook(tmp_path_factory.mktemp("airlock"), session_policies)
    try:
        asyncio.run(_prepare(control_plane, hook))
        yield hook
    finally:
        hook.running.process.terminate()
        hook.running.process.wait(timeout=20)


@pytest.fixture
async def api(control_plane: ControlPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(control_plane.admin_kubeconfig) as api_client:
        yield api_client


# --- a sandbox whose GPUs are DRA devices (`airlock sandbox up --dra`) ------------------

async def _prepare_dra(plane: ControlPlane, workdir: Path, policies: Path) -> tuple[
        Webhook, Path]:
    """Nodes, slices and classes, then the webhook reading claims with its own
    ServiceAccount (deploy/'s RBAC: what it is granted is all it can read), wired in."""
    async with await from_kubeconfig(plane.admin_kubeconfig) as api:
        await wiring.create_namespace(api, "airlock-system")
        await wiring.create_priority_classes(api, load_policy(POLICIES))
        await create_nodes(api, topology(DRA_NODES), dra=True)
        hook_kubeconfig = await wiring.account_kubeconfig(
            api, plane.url, plane.ca_file, workdir / "webhook.kubeconfig", "airlock-webhook")
        controller = await wiring.controller_kubeconfig(
            api, plane.url, plane.ca_file, workdir / "controller.kubeconfig")
        hook = await asyncio.to_thread(start_webhook, workdir, policies,
                                       extra=webhook_reading(hook_kubeconfig))
        await wiring.apply_webhook_configurations(
            api, wiring.webhook_configurations(hook.url, hook.certs.ca.read_bytes()))
        await wiring.apply_admission_policies(api)
        return hook, controller


@pytest.fixture(scope="session")
def dra_sandbox(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory,
                session_policies: Path) -> Iterator[WiredPlane]:
    """What `airlock sandbox up --dra` makes, on a control plane of its own (the shared
    one's nodes offer nvidia.com/gpu), started only when a test asks for it."""
    plane = ControlPlane(binaries).start()
    hook: Webhook | None = None
    try:
        hook, controller = asyncio.run(_prepare_dra(
            plane, tmp_path_factory.mktemp("airlock-dra"), session_policies))
        yield WiredPlane(plane, controller)
    finally:
        if hook:
            hook.running.process.terminate()
            hook.running.process.wait(timeout=20)
        plane.remove()


@pytest.fixture
async def dra_api(dra_sandbox: WiredPlane) -> AsyncIterator[client.ApiClient]:
    async with await from_kubeconfig(dra_sandbox.plane.admin_kubeconfig) as api_client:
        yield api_client


@pytest.fixture
async def spaces(dra_api: client.ApiClient) -> AsyncIterator[list[str]]:
    """Fresh namespaces of the DRA sandbox (the first made at once; append more, with
    `dra_namespace`); their pods go at once afterwards, so their claims free the devices
    for the next test."""
    made = [await dra_namespace(dra_api)]
    yield made
    core = client.CoreV1Api(dra_api)
    for name in made:
        await core.delete_namespace(name)
        await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


@pytest.fixture
def dra_controllers(dra_sandbox: WiredPlane, tmp_path: Path, session_policies: Path
                    ) -> Iterator[Controllers]:
    with dra_sandbox.controllers(tmp_path, session_policies) as running:
        yield running


# --- control planes of a fixture's own ------------------------------------------------

@contextlib.contextmanager
def _wired(plane: ControlPlane, workdir: Path, policies: Path, shape: Shape = NODES
           ) -> Iterator[WiredPlane]:
    """`plane` (started) with `shape`'s nodes, Airlock's webhook reading `policies` wired
    in, and the controller's credentials on it; all of it removed afterwards."""
    hook: Webhook | None = None

    async def wire() -> Path:
        async with await from_kubeconfig(plane.admin_kubeconfig) as api:
            return await wiring.controller_kubeconfig(
                api, plane.url, plane.ca_file, plane.workdir / "controller.kubeconfig")

    try:
        hook = start_webhook(workdir, policies)
        asyncio.run(_prepare(plane, hook, shape))
        yield WiredPlane(plane, asyncio.run(wire()))
    finally:
        if hook:
            hook.running.process.terminate()
            hook.running.process.wait(timeout=20)
        plane.remove()


@pytest.fixture(scope="module")
def gang_plane(newest_binaries: Binaries, tmp_path_factory: pytest.TempPathFactory,
               session_policies: Path) -> Iterator[WiredPlane]:
    """A 1.37 control plane serving PodGroups (scheduling.k8s.io/v1beta1) with the
    scheduler's gang plugin on (the GenericWorkload gate), its nodes those of the shared
    plane, Airlock's webhook wired in; and the controller's credentials on it."""
    plane = ControlPlane(newest_binaries, feature_gates=("GenericWorkload=true",),
                         runtime_config=("scheduling.k8s.io/v1beta1=true",)).start()
    with _wired(plane, tmp_path_factory.mktemp("airlock-gangs"), session_policies) as wired:
        yield wired


@pytest.fixture(scope="module")
def pools_plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory,
                session_policies: Path) -> Iterator[WiredPlane]:
    """What `airlock sandbox up --pools h100=2x8,a100=4x8` makes, on a control plane of
    its own: 16 H100 GPUs and 32 A100 GPUs, labelled as GPU feature discovery labels
    them, Airlock's webhook wired in."""
    with _wired(ControlPlane(binaries).start(), tmp_path_factory.mktemp("airlock-pools"),
                session_policies, MIXED_POOLS) as wired:
        yield wired


# --- a cluster that grows: the real Karpenter --------------------------------------------

def _karpenter_plane(binaries: Binaries, workdir: Path, policies: Path, shape: Shape
                     ) -> Iterator[WiredPlane]:
    """A control plane of its own with `shape`'s static nodes, Airlock's webhook wired in,
    and the real Karpenter (its kwok provider) launching nodes of each pool's size for
    Unschedulable pods (a NodePool per pool) and consolidating empty ones."""
    with _wired(ControlPlane(binaries).start(), workdir, policies, shape) as wired:
        plane = wired.plane
        running = start_karpenter(workdir, plane.admin_kubeconfig, plane.pki.ca, shape,
                                  print)
        try:
            yield wired
        finally:
            stop(running)


@pytest.fixture(scope="module")
def karpenter_plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory,
                    session_policies: Path) -> Iterator[WiredPlane]:
    """What `airlock sandbox up --autoscaler karpenter --nodes 2` makes: 2 static GPU
    nodes, and Karpenter launching 8-GPU nodes. The controller's credentials are handed
    to the test."""
    yield from _karpenter_plane(binaries, tmp_path_factory.mktemp("airlock-karpenter"),
                                session_policies, KARPENTER_STATIC)


@pytest.fixture(scope="module")
def pools_karpenter_plane(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory,
                          session_policies: Path) -> Iterator[WiredPlane]:
    """What `airlock sandbox up --pools h100=1x8,a100=1x8 --autoscaler karpenter` makes:
    a node of each model, and a Karpenter NodePool per pool launching more of it."""
    yield from _karpenter_plane(binaries, tmp_path_factory.mktemp("airlock-pools-karpenter"),
                                session_policies, KARPENTER_POOLS)


@pytest.fixture
async def namespaces(api: client.ApiClient) -> AsyncIterator[NamespaceFactory]:
    """Make fresh namespaces (`fresh_namespaces`): `await namespaces(labels={...})`."""
    async with fresh_namespaces(api) as make:
        yield make


@pytest.fixture
async def namespace(namespaces: NamespaceFactory) -> str:
    """A fresh namespace."""
    return await namespaces()


@pytest.fixture(scope="session")
def controller_kubeconfig(control_plane: ControlPlane, airlock: Webhook) -> Path:
    """Credentials of the controller's own ServiceAccount, bound to deploy/'s RBAC."""
    async def make() -> Path:
        async with await from_kubeconfig(control_plane.admin_kubeconfig) as api:
            return await wiring.controller_kubeconfig(
                api, control_plane.url, control_plane.ca_file,
                control_plane.workdir / "controller.kubeconfig")
    return asyncio.run(make())


@pytest.fixture(scope="session")
def webhook_kubeconfig(control_plane: ControlPlane) -> Path:
    """Credentials of the webhook's own ServiceAccount, bound to deploy/'s RBAC: it may
    review who scrapes its /metrics, and watch DRA claims and PriorityClasses."""
    async def make() -> Path:
        async with await from_kubeconfig(control_plane.admin_kubeconfig) as api:
            return await wiring.account_kubeconfig(
                api, control_plane.url, control_plane.ca_file,
                control_plane.workdir / "webhook.kubeconfig", "airlock-webhook")
    return asyncio.run(make())


@pytest.fixture
async def scrapers(api: client.ApiClient, namespace: str,
                   controller_kubeconfig: Path) -> AsyncIterator[Scrapers]:
    """Tokens of two ServiceAccounts in the test's namespace: `reader`, bound to the
    ClusterRole airlock-metrics-reader (deploy/, applied with the controller's RBAC) once
    the apiserver allows it, and `stranger`, bound to nothing."""
    core = client.CoreV1Api(api)
    for name in ("reader", "stranger"):
        await core.create_namespaced_service_account(namespace,
                                                     body={"metadata": {"name": name}})
    async with url_reader(api, namespace, "reader", "airlock-metrics-reader", "/metrics"):
        yield Scrapers(namespace, await service_account_token(api, namespace, "reader"),
                       await service_account_token(api, namespace, "stranger"))


@pytest.fixture
def controllers(controller_kubeconfig: Path, tmp_path: Path, session_policies: Path
                ) -> Iterator[Controllers]:
    with Controllers(tmp_path, controller_kubeconfig, session_policies) as running:
        yield running


# --- policy a test adds (the webhook and controllers read a copy of policies/) --------

@pytest.fixture(scope="session")
def session_policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of policies/ that the session's webhook and the controllers read, so a test
    can add a file (`policy_file`); the webhook reloads it within 2 s."""
    directory = tmp_path_factory.mktemp("policies")
    for f in policy_files(POLICIES):
        shutil.copy(f, directory / f.name)
    return directory




@pytest.fixture
def policy_file(session_policies: Path) -> Iterator[PolicyFileFactory]:
    """`policy_file(name, yaml_text)` adds a policy file for one test; removed after."""
    added: list[Path] = []

    def add(name: str, text: str) -> Path:
        path = session_policies / name
        path.write_text(text)
        added.append(path)
        return path

    yield add
    for path in added:
        path.unlink()


@pytest.fixture
def grant_inference(policy_file: PolicyFileFactory) -> Callable[[str], None]:
    """`grant_inference(namespace)`: pods of `namespace` may ask for inference themselves
    (the shipped policy's inference `requiresGrant`), for one test; the webhook reloads
    the policy within 2 s."""
    def grant(namespace: str) -> None:
        policy_file(f"95-grant-{namespace}.yaml", policy_yaml(f"grant-{namespace}", {
            "grants": [{"class": "inference", "namespaces": [namespace]}]}))
    return grant


# --- nodes a test adds -------------------------------------------------------------------



@pytest.fixture
async def extra_nodes(api: client.ApiClient) -> AsyncIterator[NodeFactory]:
    """`await extra_nodes([manifest, ...])` adds nodes for one test (schedulable when it
    returns); they are deleted after it, so no other test's pods land on them."""
    made: list[str] = []

    async def make(nodes: list[dict[str, Any]]) -> None:
        made.extend(n["metadata"]["name"] for n in nodes)
        await create_nodes(api, nodes)

    yield make
    core = client.CoreV1Api(api)
    for name in made:
        try:
            await core.delete_node(name)
        except ApiException as e:
            if e.status != 404:
                raise
