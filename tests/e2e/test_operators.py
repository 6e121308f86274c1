"""The real operators: a PyTorchJob, a JobSet, a LeaderWorkerSet and a
RayCluster, created as users write them. Their own controllers make the pods; Airlock's
webhook classifies and gates each pod at creation, Airlock's controller lifts each gang
whole into one NVLink domain, and KWOK runs the pods.

One set of operators serves every test here (built once and cached, started once for
this module on the shared control plane). The cluster: 8 nodes of 8 GPUs, NVLink domains
of 4 nodes."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from kubernetes_asyncio import client, watch
from kubernetes_asyncio.client.exceptions import ApiException

from tests.commands import airlock_command, run_airlock
from tests.kube import (
    Controllers,
    all_bound,
    create_gang,
    events,
    nodes_by_name,
    pods_of,
    progress,
    until,
)
from tests.paths import POLICIES, ROOT
from webhook.keys import CLASS_LABEL, GANG_LABEL, GANG_SOURCE_ANNOTATION, GATE, PLACEMENT_ANNOTATION
from webhook.sandbox.binaries import KWOK, kubernetes_release, kubernetes_tool
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.launching import free_port
from webhook.sandbox.nodes import CLIQUE_LABEL
from webhook.sandbox.operating import RunningCommand, start_operators, stop
from webhook.sandbox.operators import JOBSET, OPERATORS, OperatorError
from webhook.sandbox.wiring import WEBHOOK_CONFIGURATIONS as WEBHOOKS

WITHIN = 60.0


# Module scope: every operator test is here, and the later tests' sandboxes (the demo
# starts one of its own) do not share 2 cores with six idle operators.
@pytest.fixture(scope="module")
def operators(control_plane: ControlPlane,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[RunningCommand]]:
    """Every operator of the registry, running against the shared control plane. Under
    CI=true a build that cannot happen fails the run."""
    ops = list(OPERATORS.values())
    started = time.monotonic()
    try:
        running = start_operators(ops, tmp_path_factory.mktemp("operators"),
                                  control_plane.admin_kubeconfig, control_plane.pki.ca,
                                  progress)
    except OperatorError as e:
        if os.environ.get("CI") == "true" or "exited" in str(e) or "not ready" in str(e):
            pytest.fail(str(e))
        pytest.skip(f"operators unavailable: {e}")
    print(f"operators ready in {time.monotonic() - started:.1f}s")
    yield running
    stop(running)


@pytest.fixture
def controller(controllers: Controllers) -> None:
    controllers.start()


# Every test here runs on the operators, pods going through Airlock's webhook; those that
# make gangs, with Airlock's controller.
pytestmark = pytest.mark.usefixtures("airlock", "operators")
gangs = pytest.mark.usefixtures("controller")


def gpus(n: int) -> dict[str, Any]:
    return {"limits": {"nvidia.com/gpu": str(n)}}


async def first_seen(api: client.ApiClient, ns: str, into: dict[str, dict[str, Any]]) -> None:
    """Each pod of `ns` as it was created (the ADDED event), before anything lifted it."""
    core = client.CoreV1Api(api)
    async with watch.Watch() as w:
        async for event in w.stream(core.list_namespaced_pod, ns, _preload_content=False):
            obj = event["raw_object"] if isinstance(event, dict) else event
            if event["type"] == "ADDED":
                into.setdefault(obj["metadata"]["name"], obj)


@contextlib.asynccontextmanager
async def watching(api: client.ApiClient, ns: str) -> AsyncIterator[dict[str, dict[str, Any]]]:
    seen: dict[str, dict[str, Any]] = {}
    task = asyncio.create_task(first_seen(api, ns, seen))
    await asyncio.sleep(0.3)  # the watch is open before anything is created
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def running(api: client.ApiClient, ns: str, count: int) -> list[dict[str, Any]]:
    """The namespace's pods once `count` of them are Running, else why not."""
    deadline = time.monotonic() + WITHIN
    while True:
        items = await pods_of(api, ns)
        if len(items) == count and all(p["status"].get("phase") == "Running" for p in items):
            return items
        if time.monotonic() > deadline:
            state = {p["metadata"]["name"]: (p["status"].get("phase"),
                                             [g["name"] for g in
                                              p["spec"].get("schedulingGates") or []],
                                             p["spec"].get("nodeName"))
                     for p in items}
            raise AssertionError(f"expected {count} Running pods within {WITHIN:g}s: {state}")
        await asyncio.sleep(0.3)


def assert_gated_at_creation(seen: dict[str, dict[str, Any]], names: set[str], cls: str,
                             source: str) -> dict[str, str]:
    """Every pod came in through Airlock with its class, its gang and the gate; returns
    each pod's gang label."""
    assert set(seen) >= names, f"pods seen at creation: {sorted(seen)}"
    gangs = {}
    for name in names:
        p = seen[name]
        labels, notes = p["metadata"].get("labels") or {}, p["metadata"].get("annotations") or {}
        assert labels.get(CLASS_LABEL) == cls, (name, labels)
        assert notes.get(GANG_SOURCE_ANNOTATION) == source, (name, notes)
        assert GATE in [g["name"] for g in p["spec"].get("schedulingGates") or []], name
        gangs[name] = labels[GANG_LABEL]
    return gangs


def assert_lifted_whole(items: list[dict[str, Any]]) -> str | None:
    """One recorded decision let every member go at once; its domain (None when the
    class asks for no topology)."""
    names = {p["metadata"]["name"] for p in items}
    records = [json.loads(p["metadata"]["annotations"][PLACEMENT_ANNOTATION]) for p in items
               if PLACEMENT_ANNOTATION in p["metadata"].get("annotations", {})]
    assert [set(r["members"]) for r in records] == [names], records
    for p in items:
        assert not p["spec"].get("schedulingGates"), p["metadata"]["name"]
    domain: str | None = records[0]["domain"]
    return domain


async def assert_in_one_domain(api: client.ApiClient, items: list[dict[str, Any]]) -> None:
    domain = assert_lifted_whole(items)
    nodes = await nodes_by_name(api)
    landed = {p["metadata"]["name"]: nodes[p["spec"]["nodeName"]].get(CLIQUE_LABEL) for p in items}
    assert set(landed.values()) == {domain}, landed


async def create(api: client.ApiClient, ns: str, group: str, version: str, plural: str,
                 body: dict[str, Any]) -> None:
    await client.CustomObjectsApi(api).create_namespaced_custom_object(
        group, version, ns, plural, body)


@gangs
async def test_pytorchjob_pods_are_one_training_gang(
        api: client.ApiClient, namespace: str) -> None:
    template = {"spec": {"containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.4.0",
                                         "resources": gpus(4)}]}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "ddp"},
           "spec": {"pytorchReplicaSpecs": {
               "Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": template},
               "Worker": {"replicas": 3, "restartPolicy": "OnFailure", "template": template}}}}
    async with watching(api, namespace) as seen:
        await create(api, namespace, "kubeflow.org", "v1", "pytorchjobs", job)
        items = await running(api, namespace, 4)
    names = {"ddp-master-0", "ddp-worker-0", "ddp-worker-1", "ddp-worker-2"}
    assert {p["metadata"]["name"] for p in items} == names
    gangs = assert_gated_at_creation(seen, names, "training", "kubeflow")
    assert set(gangs.values()) == {"ddp"}
    await assert_in_one_domain(api, items)


@gangs
async def test_an_elastic_pytorchjob_runs_from_its_minimum_and_grows_as_room_frees(
        api: client.ApiClient, namespace: str) -> None:
    """`elasticPolicy` (minReplicas 2, 4 workers), read from the PyTorchJob the
    training-operator made the pods for: with room for 3 of them, 3 run at once and the
    4th joins the gang's domain when a node there frees."""
    # One domain full, one node of the other taken: 3 nodes free, side by side.
    await create_gang(api, namespace, "fill", 4)
    await until(lambda: all_bound(api, namespace, "fill", 4), within=WITHIN)
    await create_gang(api, namespace, "one", 1)
    await until(lambda: all_bound(api, namespace, "one", 1), within=WITHIN)
    template = {"spec": {"containers": [{"name": "pytorch", "image": "pytorch/pytorch:2.4.0",
                                         "resources": gpus(8)}]}}
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "elastic"},
           "spec": {"elasticPolicy": {"minReplicas": 2, "maxReplicas": 4,
                                      "rdzvBackend": "c10d"},
                    "pytorchReplicaSpecs": {"Worker": {
                        "replicas": 4, "restartPolicy": "OnFailure", "template": template}}}}
    await create(api, namespace, "kubeflow.org", "v1", "pytorchjobs", job)

    async def three_of_four() -> bool:
        workers = await pods_of(api, namespace, "elastic-worker-")
        return len(workers) == 4 and sum(bool(p["spec"].get("nodeName"))
                                         for p in workers) == 3
    await until(three_of_four, within=WITHIN)
    await asyncio.sleep(2)  # the fourth stays behind its gate: no room in the domain
    workers = await pods_of(api, namespace, "elastic-worker-")
    (waiting,) = [p for p in workers if not p["spec"].get("nodeName")]
    assert GATE in [g["name"] for g in waiting["spec"].get("schedulingGates") or []]
    records = [json.loads(p["metadata"]["annotations"][PLACEMENT_ANNOTATION])
               for p in workers if PLACEMENT_ANNOTATION in p["metadata"]["annotations"]]
    # The operator makes the pods one after another: the gang is admitted with at least
    # its minimum, and takes the third at once or as it comes.
    assert {r["minimum"] for r in records} == {2}
    assert len(min(records, key=lambda r: r["at"])["members"]) >= 2
    assert {m for r in records for m in r["members"]} == \
        {p["metadata"]["name"] for p in workers if p["spec"].get("nodeName")}
    told = await events(api, namespace, waiting["metadata"]["name"])
    assert any("above the gang's minimum of 2" in m for m in told), told

    await client.CoreV1Api(api).delete_namespaced_pod("one-0", namespace,
                                                      grace_period_seconds=0)
    items = await running(api, namespace, 8)
    nodes = await nodes_by_name(api)
    assert len({nodes[p["spec"]["nodeName"]].get(CLIQUE_LABEL) for p in items
                if p["metadata"]["name"].startswith("elastic-")}) == 1


async def test_training_operators_own_webhook_serves_on_loopback(
        api: client.ApiClient, namespace: str) -> None:
    """Its validating webhook (failurePolicy Fail) answers through the loopback URL, with
    the certificate its own rotator accepted: a PyTorchJob without a `pytorch` container
    is refused by the training-operator itself."""
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "bad"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {
               "spec": {"containers": [{"name": "main", "image": "pytorch/pytorch:2.4.0"}]}}}}}}
    with pytest.raises(ApiException) as refused:
        await create(api, namespace, "kubeflow.org", "v1", "pytorchjobs", job)
    assert refused.value.status == 403, refused.value  # denied by the webhook
    assert "validator.pytorchjob.training-operator.kubeflow.org" in str(refused.value.body)
    assert "must have at least one container with name pytorch" in str(refused.value.body)


@gangs
async def test_jobset_replicated_job_is_one_gang(
        api: client.ApiClient, namespace: str) -> None:
    job_template = {"spec": {"parallelism": 2, "completions": 2, "backoffLimit": 0,
                             "template": {"spec": {"restartPolicy": "Never", "containers": [
                                 {"name": "trainer", "image": "ghcr.io/acme/trainer:1.0",
                                  "resources": gpus(4)}]}}}}
    jobset = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
              "metadata": {"name": "pretrain"},
              "spec": {"replicatedJobs": [{"name": "workers", "replicas": 2,
                                           "template": job_template}]}}
    async with watching(api, namespace) as seen:
        await create(api, namespace, "jobset.x-k8s.io", "v1alpha2", "jobsets", jobset)
        items = await running(api, namespace, 4)
    names = {p["metadata"]["name"] for p in items}
    # Job pretrain-workers-<job index>, pods <job>-<completion index>-<random>.
    assert all(n.startswith("pretrain-workers-") for n in names), names
    gangs = assert_gated_at_creation(seen, names, "training", "jobset")
    assert set(gangs.values()) == {"pretrain-workers"}
    await assert_in_one_domain(api, items)


@gangs
async def test_leaderworkerset_forms_one_gang_per_group(
        api: client.ApiClient, namespace: str) -> None:
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "llama"},
           "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
               "spec": {"containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.9.0",
                                        "resources": gpus(4)}]}}}}}
    async with watching(api, namespace) as seen:
        await create(api, namespace, "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", lws)
        items = await running(api, namespace, 4)
    names = {p["metadata"]["name"] for p in items}
    assert names == {"llama-0", "llama-0-1", "llama-1", "llama-1-1"}
    gangs = assert_gated_at_creation(seen, names, "inference", "leaderworkerset")
    assert gangs == {"llama-0": "llama-0", "llama-0-1": "llama-0",
                     "llama-1": "llama-1", "llama-1-1": "llama-1"}
    # Serving groups are inference: spread over hosts, with no NVLink domain asked for.
    for group in ("llama-0", "llama-1"):
        assert assert_lifted_whole([p for p in items
                                    if p["metadata"]["labels"][GANG_LABEL] == group]) is None


@gangs
async def test_raycluster_head_and_workers_are_one_gang(
        api: client.ApiClient, namespace: str) -> None:
    def group(name: str, n: int) -> dict[str, Any]:
        return {"spec": {"containers": [{"name": name, "image": "rayproject/ray:2.46.0",
                                         "resources": gpus(n)}]}}
    cluster = {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rl"},
               "spec": {"headGroupSpec": {"rayStartParams": {},
                                          "template": group("ray-head", 1)},
                        "workerGroupSpecs": [{"groupName": "gpu", "replicas": 3,
                                              "minReplicas": 0, "maxReplicas": 3,
                                              "rayStartParams": {},
                                              "template": group("ray-worker", 4)}]}}
    async with watching(api, namespace) as seen:
        await create(api, namespace, "ray.io", "v1", "rayclusters", cluster)
        items = await running(api, namespace, 4)
    names = {p["metadata"]["name"] for p in items}
    gangs = assert_gated_at_creation(seen, names, "training", "kuberay")
    assert set(gangs.values()) == {"rl"}
    assert sorted(p["metadata"]["labels"]["ray.io/node-type"] for p in items) == \
        ["head", "worker", "worker", "worker"]
    await assert_in_one_domain(api, items)


def test_operators_report_as_running(operators: list[RunningCommand]) -> None:
    names = {r.name for r in operators}
    assert names == {"jobset", "lws", "training-operator", "kuberay",
                     "cert-manager/cert-manager-controller",
                     "cert-manager/cert-manager-cainjector"}
    for r in operators:
        assert r.process.poll() is None, Path(r.log).read_text()[-2000:]


# --- cert-manager, live ----------------------------------------------------------------

OVERLAY = ROOT / "deploy" / "overlays" / "cert-manager"
TLS_SECRET = "airlock-webhook-tls"


def overlay_objects() -> list[dict[str, Any]]:
    """deploy/overlays/cert-manager's Issuers and Certificates, the serving Certificate
    also naming 127.0.0.1: the sandbox calls its webhook by a loopback URL."""
    docs = [d for d in yaml.safe_load_all((OVERLAY / "certificates.yaml").read_text()) if d]
    for doc in docs:
        if doc["kind"] == "Certificate" and doc["spec"]["secretName"] == TLS_SECRET:
            doc["spec"]["ipAddresses"] = ["127.0.0.1"]
    return docs


async def project_secret(api: client.ApiClient, ns: str, into: Path) -> None:
    """What the kubelet does with a mounted Secret: each version written into a fresh
    directory, then the `..data` symlink swapped to it in one rename."""
    core = client.CoreV1Api(api)
    into.mkdir(parents=True, exist_ok=True)
    for name in ("tls.crt", "tls.key"):
        link = into / name
        if not link.is_symlink():
            link.symlink_to(f"..data/{name}")
    async with watch.Watch() as w:
        async for event in w.stream(core.list_namespaced_secret, ns,
                                    field_selector=f"metadata.name={TLS_SECRET}",
                                    _preload_content=False):
            obj = event["raw_object"]
            data = obj.get("data") or {}
            if event["type"] == "DELETED" or not data.get("tls.crt"):
                continue
            version = into / f"..{obj['metadata']['resourceVersion']}"
            version.mkdir(exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                (version / name).write_bytes(base64.b64decode(data[name]))
            tmp = into / "..data_tmp"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(version.name)
            os.replace(tmp, into / "..data")


def served_serial(port: int) -> int:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


async def test_cert_manager_issues_injects_and_renews_under_load(
        api: client.ApiClient, namespace: str, tmp_path: Path) -> None:
    custom = client.CustomObjectsApi(api)
    for doc in overlay_objects():
        plural = "issuers" if doc["kind"] == "Issuer" else "certificates"
        with contextlib.suppress(ApiException):
            await custom.delete_namespaced_custom_object(
                "cert-manager.io", "v1", "airlock-system", plural, doc["metadata"]["name"])
        await create(api, "airlock-system", "cert-manager.io", "v1", plural, doc)
    certs = tmp_path / "certs"
    projector = asyncio.create_task(project_secret(api, "airlock-system", certs))
    port = free_port()
    deadline = time.monotonic() + WITHIN
    while not (certs / "tls.crt").exists():  # issued by cert-manager, then projected
        assert time.monotonic() < deadline, "no serving certificate from cert-manager"
        await asyncio.sleep(0.3)
    with (tmp_path / "webhook.log").open("wb") as log:
        hook = await asyncio.create_subprocess_exec(
            *airlock_command("serve", "--host", "127.0.0.1", "--port", str(port),
                             "--cert-dir", str(certs), "--policies", str(POLICIES),
                             "--drain-seconds", "0"), stdout=log, stderr=subprocess.STDOUT)
    admission = client.AdmissionregistrationV1Api(api)
    name = f"airlock-cm-{namespace}"
    try:
        while True:  # served
            with contextlib.suppress(OSError, ssl.SSLError):
                first = served_serial(port)
                break
            assert time.monotonic() < deadline, (tmp_path / "webhook.log").read_text()
            await asyncio.sleep(0.3)
        # Deploy/'s mutating configuration, failing closed so that a single failed
        # admission shows, scoped to this test's namespace, its caBundle left to cainjector.
        doc = next(d for d in yaml.safe_load_all(WEBHOOKS.read_text())
                   if d and d["kind"] == "MutatingWebhookConfiguration")
        doc["metadata"]["name"] = name
        hook_spec = doc["webhooks"][0]
        hook_spec["failurePolicy"] = "Fail"
        hook_spec["clientConfig"] = {"url": f"https://127.0.0.1:{port}/mutate"}
        hook_spec["namespaceSelector"] = {"matchLabels": {
            "kubernetes.io/metadata.name": namespace}}
        await admission.create_mutating_webhook_configuration(body=doc)

        async def injected() -> bool:
            made = await admission.read_mutating_webhook_configuration(name)
            return bool(made.webhooks[0].client_config.ca_bundle)
        await until(injected)

        core = client.CoreV1Api(api)
        failures: list[str] = []
        sent = 0
        stop_load = asyncio.Event()

        async def load() -> None:
            nonlocal sent
            body = {"metadata": {"generateName": "load-", "labels": {CLASS_LABEL: "scavenger"}},
                    "spec": {"containers": [{"name": "main", "image": "ghcr.io/acme/embed:3.2",
                                             "resources": gpus(1)}]}}
            while not stop_load.is_set():
                try:
                    made = await core.create_namespaced_pod(namespace, body=body, dry_run="All")
                    if made.spec.priority_class_name != "airlock-scavenger":
                        failures.append(f"not mutated: {made.spec.priority_class_name}")
                except ApiException as e:
                    failures.append(f"{e.status} {e.reason}: {e.body!r}")
                sent += 1

        loaders = [asyncio.create_task(load()) for _ in range(4)]
        await asyncio.sleep(2)
        # What `cmctl renew` does: cert-manager reissues (a new key: rotationPolicy Always).
        await custom.patch_namespaced_custom_object_status(
            "cert-manager.io", "v1", "airlock-system", "certificates", "airlock-webhook",
            [{"op": "add", "path": "/status/conditions/-", "value": {
                "type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                "message": "renewal under load (e2e)",
                "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}}])

        async def renewed() -> bool:
            return served_serial(port) != first
        await until(renewed, WITHIN)
        await asyncio.sleep(2)
        stop_load.set()
        await asyncio.gather(*loaders)
        assert sent > 20, sent
        assert failures == [], failures[:5]
        print(f"{sent} admissions through the renewal, none failed")
    finally:
        projector.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await projector
        with contextlib.suppress(ApiException):
            await admission.delete_mutating_webhook_configuration(name)
        hook.terminate()
        await hook.wait()


def test_an_operator_that_fails_to_start_is_named_and_up_stops_everything(
        tmp_path: Path) -> None:
    """`sandbox up --operators jobset` with a JobSet binary that exits at once: the error
    names the operator and its log, and nothing of the sandbox is left running. The
    cache is the real one but for that binary."""
    cache = tmp_path / "cache"
    cache.mkdir()
    for tool in (kubernetes_tool(kubernetes_release()), KWOK):
        (cache / tool.directory.name).symlink_to(tool.directory)
    broken = cache / JOBSET.tool.directory.name
    (broken / "bin").mkdir(parents=True)
    (broken / "manifests").symlink_to(JOBSET.tool.directory / "manifests")
    binary = broken / "bin" / "jobset"
    binary.write_text("#!/bin/sh\necho 'flag provided but not defined: -config' >&2\nexit 2\n")
    binary.chmod(0o755)
    (broken / "bin" / ".jobset.recipe").write_text(JOBSET.tool.recipe)
    state = tmp_path / "sandbox"
    done = run_airlock("sandbox", "up", "--operators", "jobset", "--nodes", "4",
                       "--state-dir", str(state), env={"AIRLOCK_CACHE_DIR": str(cache)})
    assert done.returncode == 1, done.stderr
    log = state / "operators" / "jobset" / "jobset.log"
    assert f"operator jobset exited with 2; log: {log}" in done.stderr
    assert "flag provided but not defined" in done.stderr
    assert not (state / "state.json").exists()
    leftover = subprocess.run(["pgrep", "-f", str(state)], capture_output=True, text=True)
    assert leftover.stdout == "", leftover.stdout
