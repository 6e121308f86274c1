"""Helpers for tests against a real apiserver: create what users create, read back what
the cluster made of it, wait for a condition without a fixed sleep; the controller
processes a test starts, the types of what the e2e fixtures hand a test, kubectl and what
kustomize renders of deploy/, and what a missing prerequisite does. Test modules import
these from here, never from a conftest."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import json
import os
import ssl
import subprocess
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import aiohttp
import pytest
import yaml
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from tests.builders import GPU, claim_template, gang_pod, iso
from tests.commands import airlock_command
from webhook.keys import GATE
from webhook.pools import parse_spec
from webhook.sandbox import wiring
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.devices import CHANNEL_CLASS, GPU_CLASS
from webhook.sandbox.nodes import Shape
from webhook.sandbox.processes import AirlockProcess, start_controller
from webhook.values import units

# The end-to-end cluster's nodes (tests/e2e/conftest.py): 8 GPUs each.
GPUS_PER_NODE = 8
# The DRA sandbox's (`sandbox up --dra`): 16 nodes whose GPUs are only DRA devices, in 2
# NVLink domains of 64 GPUs.
DRA_NODES = Shape(nodes=16, nodes_per_domain=8, dra=True)
# The Karpenter sandbox's static nodes (`sandbox up --autoscaler karpenter --nodes 2`):
# one domain of 16 GPUs; what it launches is in a domain of its own.
KARPENTER_STATIC = Shape(nodes=2, nodes_per_domain=2)
# The mixed sandbox's (`sandbox up --pools h100=2x8,a100=4x8`): 16 H100 GPUs and 32 A100.
MIXED_POOLS = Shape(pools=parse_spec("h100=2x8,a100=4x8"))
# And with Karpenter (`--pools h100=1x8,a100=1x8 --autoscaler karpenter`): a node of each
# model, and a NodePool per pool.
KARPENTER_POOLS = Shape(pools=parse_spec("h100=1x8,a100=1x8"))

# What the e2e fixtures hand a test: make a namespace, add a policy file (name, text),
# add nodes (manifests).
NamespaceFactory = Callable[..., Awaitable[str]]
PolicyFileFactory = Callable[[str, str], Path]
NodeFactory = Callable[[list[dict[str, Any]]], Awaitable[None]]


@contextlib.asynccontextmanager
async def fresh_namespaces(api: client.ApiClient, prefix: str = "e2e"
                           ) -> AsyncIterator[NamespaceFactory]:
    """Make fresh namespaces: `await make(labels={...})`, each with its `default`
    ServiceAccount. Afterwards the namespace controller removes them and all in them;
    their pods are also deleted at once (grace 0), so they hold no GPU (or DRA device) of
    the next test while KWOK and the namespace controller get to them."""
    made: list[str] = []

    async def make(labels: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        await wiring.create_namespace(api, name, labels)
        made.append(name)
        return name

    try:
        yield make
    finally:
        core = client.CoreV1Api(api)
        for name in made:
            # The namespace first: once it is terminating, no Job or ReplicaSet can
            # replace the pods deleted next.
            await core.delete_namespace(name)
            await core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


@contextlib.asynccontextmanager
async def not_ready_nodes(api: client.ApiClient, nodes: list[dict[str, Any]],
                          beat: float = 10.0) -> AsyncIterator[None]:
    """Nodes whose kubelet reports them as their manifests' conditions say (NotReady),
    for a test, deleted after. KWOK leaves them alone (they lack its annotation), and a
    heartbeat every `beat` seconds keeps the conditions fresh: past the node monitor's
    grace period (50 s on the harness's plane) the node lifecycle controller would make
    them Unknown and swap their not-ready taints for unreachable ones mid-test."""
    core = client.CoreV1Api(api)
    since = iso(time.time())

    def conditions(node: dict[str, Any]) -> list[dict[str, Any]]:
        now = iso(time.time())
        return [{**c, "lastHeartbeatTime": now, "lastTransitionTime": since}
                for c in node["status"]["conditions"]]

    await asyncio.gather(*(core.create_node(body={
        **node, "status": {**node["status"], "conditions": conditions(node)}})
        for node in nodes))

    async def heartbeats() -> None:
        while True:
            await asyncio.sleep(beat)
            await asyncio.gather(*(core.patch_node_status(
                n["metadata"]["name"], {"status": {"conditions": conditions(n)}})
                for n in nodes))

    beating = asyncio.create_task(heartbeats())
    try:
        yield
    finally:
        beating.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await beating
        for node in nodes:
            try:
                await core.delete_node(node["metadata"]["name"])
            except ApiException as e:
                if e.status != 404:
                    raise


@dataclass(frozen=True)
class WiredPlane:
    """A control plane of a fixture's own (the DRA sandbox, 1.37's gangs), Airlock's
    webhook wired in, and the controller's own ServiceAccount's credentials on it."""

    plane: ControlPlane
    controller_kubeconfig: Path

    def controllers(self, workdir: Path, policies: Path) -> Controllers:
        """Controller processes on this plane, with the controller's credentials."""
        return Controllers(workdir, self.controller_kubeconfig, policies)


@dataclass(frozen=True)
class Scrapers:
    """Bearer tokens of two service accounts of a test's namespace: `reader`'s is bound
    to the ClusterRole airlock-metrics-reader, `stranger`'s to nothing."""

    namespace: str
    reader: str
    stranger: str


@contextlib.asynccontextmanager
async def url_reader(api: client.ApiClient, namespace: str, account: str, role: str,
                     path: str) -> AsyncIterator[None]:
    """The ServiceAccount `account` of `namespace` bound to the ClusterRole `role` (which
    grants `get` on the non-resource URL `path`) once the apiserver allows it: verdicts
    are reviewed and kept a minute, so a first request must not meet the binding before
    the apiserver's authorizer does. The binding is removed after."""
    rbac = client.RbacAuthorizationV1Api(api)
    binding = f"e2e-{role}-{namespace}-{account}"
    await rbac.create_cluster_role_binding(body={
        "metadata": {"name": binding},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]})

    async def allowed() -> bool:
        review = await client.AuthorizationV1Api(api).create_subject_access_review(body={
            "spec": {"user": f"system:serviceaccount:{namespace}:{account}",
                     "nonResourceAttributes": {"path": path, "verb": "get"}}})
        return bool(review.status.allowed)

    try:
        await until(allowed)
        yield
    finally:
        await rbac.delete_cluster_role_binding(binding)


def progress(line: str) -> None:
    """A build's or an operator's progress, shown as it comes (with `pytest -s`)."""
    print(line, flush=True)


def prerequisite_missing(message: str) -> NoReturn:
    """A binary or operator a test needs is not there: under CI=true that fails the run
    (scripts/test.sh builds everything first), elsewhere the test skips."""
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


# The kinds of deploy/ that live in no namespace.
CLUSTER_SCOPED = frozenset({
    "Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
    "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"})


def documents(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML stream (empty documents left out)."""
    return [d for d in yaml.safe_load_all(text) if d]


def kubectl(binary: Path, *args: str, kubeconfig: Path | None = None,
            stdin: str | None = None, check: bool = True,
            timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`kubectl ARGS` with the harness's `binary`, as the user of `kubeconfig` (rendering
    needs none). With `check`, a failure fails the test with kubectl's stderr; without,
    the exit code is the caller's to read."""
    config = [] if kubeconfig is None else ["--kubeconfig", str(kubeconfig)]
    out = subprocess.run([str(binary), *config, *args], input=stdin, capture_output=True,
                         text=True, timeout=timeout, check=False)
    if check:
        assert out.returncode == 0, f"kubectl {' '.join(args)} failed:\n{out.stderr}"
    return out


def kustomize(binary: Path, path: Path) -> list[dict[str, Any]]:
    """What `kubectl kustomize PATH` renders: the real tool decides what deploy/ is."""
    return documents(kubectl(binary, "kustomize", str(path)).stdout)


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None
         ) -> list[dict[str, Any]]:
    """The rendered objects of `kind`, and of `name` when given."""
    return [d for d in docs if d["kind"] == kind
            and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    """The one rendered object of `kind` and `name`."""
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind}/{name}, found {len(found)}"
    return found[0]


class Controllers:
    """Controller processes for one test, all stopped (SIGKILL if need be) after it."""

    def __init__(self, workdir: Path, kubeconfig: Path, policies: Path) -> None:
        self.workdir, self.kubeconfig, self.policies = workdir, kubeconfig, policies
        self.running: list[AirlockProcess] = []

    def start(self, *extra: str, identity: str | None = None) -> AirlockProcess:
        proc = start_controller(self.workdir, self.kubeconfig, self.policies, list(extra),
                                identity=identity)
        self.running.append(proc)
        return proc

    def __enter__(self) -> Controllers:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop_all()

    def stop_all(self) -> None:
        for proc in self.running:
            if proc.process.poll() is None:
                proc.process.kill()
            proc.process.wait()


async def create_gang(api: client.ApiClient, ns: str, gang: str, size: int, count: int | None
                      = None, **kw: Any) -> None:
    core = client.CoreV1Api(api)
    await asyncio.gather(*(core.create_namespaced_pod(ns, body=gang_pod(gang, i, size, **kw))
                           for i in range(size if count is None else count)))


async def pods_of(api: client.ApiClient, ns: str, prefix: str = "") -> list[dict[str, Any]]:
    response = await client.CoreV1Api(api).list_namespaced_pod(ns, _preload_content=False)
    items: list[dict[str, Any]] = (await response.json())["items"]
    return [p for p in items if p["metadata"]["name"].startswith(prefix)]


async def all_bound(api: client.ApiClient, ns: str, prefix: str, count: int) -> bool:
    """Whether exactly `count` pods named from `prefix` exist, each bound to a node."""
    pods = await pods_of(api, ns, prefix)
    return len(pods) == count and all(p["spec"].get("nodeName") for p in pods)


async def all_running(api: client.ApiClient, ns: str, prefix: str, count: int) -> bool:
    """Whether exactly `count` pods named from `prefix` exist, each Running (KWOK's word,
    as a kubelet's)."""
    pods = await pods_of(api, ns, prefix)
    return len(pods) == count and all(p["status"].get("phase") == "Running" for p in pods)


async def grant_edit(api: client.ApiClient, namespace: str, user: str) -> None:
    """`user` may do in `namespace` what Kubernetes' built-in ClusterRole `edit` allows (a
    RoleBinding): pods and the workloads that make them, budgets, claims, nothing of
    Airlock's; back once the apiserver's authorizer lets her create pods there."""
    await client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(namespace, body={
        "metadata": {"name": f"{user}-edits"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})

    async def allowed() -> bool:
        review = await client.AuthorizationV1Api(api).create_subject_access_review(body={
            "spec": {"user": user, "resourceAttributes": {
                "namespace": namespace, "verb": "create", "resource": "pods"}}})
        return bool(review.status.allowed)

    await until(allowed)


def gated(p: Mapping[str, Any]) -> bool:
    return any(g["name"] == GATE for g in p["spec"].get("schedulingGates") or [])


async def until(check: Callable[[], Awaitable[bool]], within: float = 30.0) -> None:
    deadline = time.monotonic() + within
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached within {within}s")
        await asyncio.sleep(0.2)


async def nodes_by_name(api: client.ApiClient) -> dict[str, dict[str, str]]:
    response = await client.CoreV1Api(api).list_node(_preload_content=False)
    return {n["metadata"]["name"]: n["metadata"]["labels"]
            for n in (await response.json())["items"]}


async def events(api: client.ApiClient, ns: str, prefix: str = "", of: str = "message"
                 ) -> list[str]:
    """What the events on the objects named from `prefix` say (`of="reason"`: their
    reasons)."""
    response = await client.CoreV1Api(api).list_namespaced_event(ns, _preload_content=False)
    return [e[of] for e in (await response.json())["items"]
            if e["involvedObject"]["name"].startswith(prefix)]


def pod_gpus(pod: Mapping[str, Any]) -> int:
    """The whole GPUs a pod's containers ask for, as the apiserver stored them."""
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        resources = c.get("resources") or {}
        asked = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        total += units(asked.get(GPU, 0))
    return total


async def free_gpus(api: client.ApiClient) -> dict[str, int]:
    """Each node's GPUs less those of the pods bound there and not finished, as
    kube-scheduler counts them."""
    core = client.CoreV1Api(api)
    listed = await (await core.list_node(_preload_content=False)).json()
    free = {n["metadata"]["name"]: units(n["status"].get("allocatable", {}).get(GPU, 0))
            for n in listed["items"]}
    pods = await (await core.list_pod_for_all_namespaces(_preload_content=False)).json()
    for p in pods["items"]:
        node = p["spec"].get("nodeName")
        if node in free and p["status"].get("phase") not in ("Succeeded", "Failed"):
            free[node] -= pod_gpus(p)
    return free


async def dry_run(api: client.ApiClient, ns: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the apiserver would store for `body` (admission webhooks included), without
    storing it; a Status when it is denied."""
    response = await client.CoreV1Api(api).create_namespaced_pod(
        ns, body=body, dry_run="All", _preload_content=False)
    answer: dict[str, Any] = await response.json()
    return answer


def metrics_url(proc: AirlockProcess) -> str:
    """Where a controller process serves /metrics and /healthz (its --metrics-port)."""
    argv = [str(a) for a in proc.process.args]  # type: ignore[union-attr]
    return f"https://127.0.0.1:{argv[argv.index('--metrics-port') + 1]}"


async def scrape(url: str, token: str | None = None,
                 ca: Path | None = None) -> tuple[int, str]:
    """GET `url` as Prometheus does, with `token` as its bearer token: the status and the
    body. TLS is verified against `ca`; without one it is not (the controller makes its
    certificate at start, signed by nothing a client knows)."""
    verify: ssl.SSLContext | bool = ssl.create_default_context(cafile=str(ca)) \
        if ca is not None else False
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as http, \
            http.get(url, headers=headers, ssl=verify) as response:
        return response.status, await response.text()


# --- DRA: what kube-controller-manager and kube-scheduler made of pods' claims ----------

async def create_template(api: client.ApiClient, ns: str, name: str, device_class: str,
                          count: int = GPUS_PER_NODE, selector: str | None = None) -> None:
    await client.ResourceV1Api(api).create_namespaced_resource_claim_template(
        ns, claim_template(name, device_class, count, ns, selector=selector))


async def airlock_status(kubeconfig: Path, policies: Path) -> dict[str, Any]:
    """`airlock status -o json`, run as a person would run it."""
    shown = await asyncio.create_subprocess_exec(
        *airlock_command("status", "--kubeconfig", str(kubeconfig),
                         "--policies", str(policies), "-o", "json"),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(shown.communicate(), 60)
    assert shown.returncode == 0
    found: dict[str, Any] = json.loads(out)
    return found


# A template of one node's GPUs, in each namespace `dra_namespace` makes.
EIGHT = "node-of-gpus"


async def dra_namespace(api: client.ApiClient) -> str:
    """A fresh namespace of the DRA sandbox with a template of one node's GPUs (8 devices
    of gpu.nvidia.com) and one of an IMEX channel."""
    name = f"e2e-dra-{uuid.uuid4().hex[:8]}"
    await wiring.create_namespace(api, name)
    await create_template(api, name, EIGHT, GPU_CLASS)
    await create_template(api, name, "channel", CHANNEL_CLASS, 1)
    return name


async def read_pod(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    response = await client.CoreV1Api(api).read_namespaced_pod(name, ns,
                                                                _preload_content=False)
    pod: dict[str, Any] = await response.json()
    return pod


async def claims_of(api: client.ApiClient, ns: str, pod: Mapping[str, Any]
                    ) -> list[dict[str, Any]]:
    """The claims kube-controller-manager made from the pod's templates, as the pod's
    status names them, in the order of its `resourceClaims`."""
    statuses = {s["name"]: s["resourceClaimName"]
                for s in pod["status"].get("resourceClaimStatuses") or []}
    resource = client.ResourceV1Api(api)
    claims = []
    for entry in pod["spec"].get("resourceClaims") or []:
        assert entry["name"] in statuses, pod["status"]
        response = await resource.read_namespaced_resource_claim(
            statuses[entry["name"]], ns, _preload_content=False)
        claims.append(await response.json())
    return claims


def allocated(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The devices allocated to the claim, checked to be reserved for the pod and made
    for it from its template."""
    owner = claim["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Pod", pod["metadata"]["uid"])
    status = claim.get("status") or {}
    assert [r["uid"] for r in status.get("reservedFor") or []] == [pod["metadata"]["uid"]]
    results: list[dict[str, Any]] = status["allocation"]["devices"]["results"]
    return results


async def running_since(api: client.ApiClient, pod: dict[str, object], hours: float) -> None:
    """Say, as a kubelet would, that `pod` has been running for `hours`."""
    meta = pod["metadata"]
    assert isinstance(meta, dict)
    started = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=hours)
    await client.CoreV1Api(api).patch_namespaced_pod_status(
        meta["name"], meta["namespace"],
        body={"status": {"phase": "Running",
                         "startTime": started.strftime("%Y-%m-%dT%H:%M:%SZ")}})
