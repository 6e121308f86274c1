"""`kubectl airlock` as a user runs it: the installed `kubectl-airlock` executable (and
the real kubectl finding it on PATH), against the real control plane, reading the policy
from the ConfigMap the deployment mounts. A gang that can never fit waits with a reason
`why` names; pods Airlock does not govern are said to be so, and why; an unreachable
apiserver and a user without rights get one line, not a traceback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from kubernetes_asyncio import client

from tests.builders import pod, template
from tests.commands import run_airlock
from tests.kube import Controllers, create_gang, documents, until
from tests.paths import ROOT, WORKLOAD_EXAMPLES
from webhook.keys import POLICY_CONFIGMAP, SYSTEM_NAMESPACE
from webhook.sandbox import wiring
from webhook.sandbox.binaries import Binaries
from webhook.sandbox.controlplane import ControlPlane

PLUGIN = Path(sys.executable).parent / "kubectl-airlock"
# 9 pods of 8 GPUs: more than the shared plane's 8 nodes hold, even empty.
TOO_BIG = 9


def plugin(*args: str, kubeconfig: Path | None = None,
           env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    config = [] if kubeconfig is None else ["--kubeconfig", str(kubeconfig)]
    return subprocess.run([str(PLUGIN), *args, *config], capture_output=True, text=True,
                          timeout=120, check=False, env={**os.environ, **(env or {})})


def through_kubectl(binaries: Binaries, *args: str, kubeconfig: Path | None = None
                    ) -> subprocess.CompletedProcess[str]:
    """`kubectl ARGS` with the plugin's directory on PATH, as krew would leave it."""
    path = os.pathsep.join((str(PLUGIN.parent), os.environ["PATH"]))
    env = {**os.environ, "PATH": path}
    if kubeconfig is not None:
        env["KUBECONFIG"] = str(kubeconfig)
    return subprocess.run([str(binaries.kubectl), *args], capture_output=True, text=True,
                          timeout=120, check=False, env=env)


def one_line_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0, done.stdout
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    return done.stderr


@pytest.fixture
async def cluster_policy(api: client.ApiClient, session_policies: Path
                         ) -> AsyncIterator[None]:
    """The policy in the ConfigMap deploy/ makes of policies/, as on a real install (and
    as `airlock sandbox up` makes it)."""
    await wiring.publish_policy(api, session_policies)
    yield
    await client.CoreV1Api(api).delete_namespaced_config_map(POLICY_CONFIGMAP,
                                                             SYSTEM_NAMESPACE)


async def _gated(api: client.ApiClient, namespace: str, count: int) -> bool:
    listed = await client.CoreV1Api(api).list_namespaced_pod(namespace)
    return len(listed.items) == count and all(p.spec.scheduling_gates for p in listed.items)


@pytest.mark.usefixtures("airlock", "cluster_policy")
async def test_status_queues_and_why_of_a_gang_that_never_fits(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane,
        binaries: Binaries) -> None:
    await create_gang(api, namespace, "huge", TOO_BIG)
    await until(lambda: _gated(api, namespace, TOO_BIG), within=30)
    config = control_plane.admin_kubeconfig

    status = plugin("status", "-o", "json", kubeconfig=config)
    assert status.returncode == 0, status.stderr
    (waits,) = [w for w in json.loads(status.stdout)["waiting"]
                if w["gang"] == f"{namespace}/huge"]
    assert waits["reason"] == "NeverFits"
    text = plugin("status", kubeconfig=config)
    assert text.returncode == 0, text.stderr
    assert f"{namespace}/huge  queue default" in text.stdout

    queues = plugin("queues", "-o", "json", kubeconfig=config)
    assert queues.returncode == 0, queues.stderr
    (default,) = [q for q in json.loads(queues.stdout)["queues"] if q["name"] == "default"]
    assert default["waitingGangs"] >= 1
    assert default["waitingGpus"] >= TOO_BIG * 8
    assert plugin("queues", kubeconfig=config).stdout.startswith("QUEUE ")

    why = plugin("why", "huge-3", "-n", namespace, kubeconfig=config)
    assert why.returncode == 0, why.stderr
    assert f"Gang:     {namespace}/huge ({TOO_BIG} pods, {TOO_BIG * 8} GPUs" in why.stdout
    assert "Reason:   NeverFits: " in why.stdout
    assert "To start: more nodes than the cluster has" in why.stdout
    told = json.loads(plugin("why", "pod/huge-0", "-n", namespace, "-o", "json",
                             kubeconfig=config).stdout)
    (gang,) = told["gangs"]
    assert gang["waiting"]["reason"] == "NeverFits"
    assert len(gang["pods"]) == 1

    # The real kubectl finds the plugin on PATH, and the plugin reads KUBECONFIG.
    through = through_kubectl(binaries, "airlock", "why", "huge-1", "--namespace", namespace,
                              kubeconfig=config)
    assert through.returncode == 0, through.stderr
    assert "Reason:   NeverFits" in through.stdout
    helped = through_kubectl(binaries, "airlock", "--help")
    assert helped.stdout.startswith("usage: kubectl airlock"), helped.stderr


@pytest.mark.usefixtures("airlock", "cluster_policy")
def test_explain_runs_under_the_clusters_policy(control_plane: ControlPlane,
                                                 session_policies: Path) -> None:
    example = str(WORKLOAD_EXAMPLES / "pytorchjob.yaml")
    told = plugin("explain", "-f", example, "-o", "json",
                  kubeconfig=control_plane.admin_kubeconfig)
    assert told.returncode == 0, told.stderr
    local = run_airlock("explain", "-f", example, "--policies", str(session_policies),
                        "-o", "json")
    assert told.stdout == local.stdout
    assert told.stdout

@pytest.mark.usefixtures("airlock", "cluster_policy")
async def test_why_of_a_deployment_finds_its_pods_through_its_replicaset(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane) -> None:
    template = pod("unused").gang("wide", TOO_BIG).gpus(8).build()
    template["metadata"] = {"labels": {**template["metadata"]["labels"], "app": "wide"},
                            "annotations": template["metadata"].get("annotations", {})}
    await client.AppsV1Api(api).create_namespaced_deployment(namespace, body={
        "metadata": {"name": "wide"},
        "spec": {"replicas": TOO_BIG, "selector": {"matchLabels": {"app": "wide"}},
                 "template": template}})
    await until(lambda: _gated(api, namespace, TOO_BIG), within=60)
    why = plugin("why", "deploy/wide", "-n", namespace, "-o", "json",
                 kubeconfig=control_plane.admin_kubeconfig)
    assert why.returncode == 0, why.stderr
    (gang,) = json.loads(why.stdout)["gangs"]
    assert gang["gang"] == f"{namespace}/wide"
    assert len(gang["pods"]) == TOO_BIG
    assert gang["waiting"]["reason"] == "NeverFits"


@pytest.mark.usefixtures("airlock", "cluster_policy")
async def test_why_says_which_pods_airlock_does_not_govern_and_why(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane) -> None:
    core = client.CoreV1Api(api)
    system = pod("gpu-tool", "kube-system").gpus(1).build()
    await core.create_namespaced_pod("kube-system", body=system)
    try:
        told = plugin("why", "gpu-tool", "-n", "kube-system",
                      kubeconfig=control_plane.admin_kubeconfig)
        assert told.returncode == 0, told.stderr
        assert told.stdout == ("pod kube-system/gpu-tool: not governed by Airlock: "
                               "namespace kube-system is excluded\n")
    finally:
        await core.delete_namespaced_pod("gpu-tool", "kube-system", grace_period_seconds=0)

    cpu = pod("cpu-only", namespace).build()
    await core.create_namespaced_pod(namespace, body=cpu)
    told = plugin("why", "cpu-only", "-n", namespace, kubeconfig=control_plane.admin_kubeconfig)
    assert told.stdout == (f"pod {namespace}/cpu-only: not governed by Airlock: requests no "
                           "accelerator and has no explicit class\n"), told.stderr

    missing = plugin("why", "nobody", "-n", namespace, kubeconfig=control_plane.admin_kubeconfig)
    assert f"pod {namespace}/nobody not found" in one_line_error(missing)


@pytest.mark.usefixtures("airlock")
def test_an_unreachable_apiserver_a_user_without_rights_or_no_airlock_get_one_line(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    nowhere = tmp_path / "nowhere.kubeconfig"
    nowhere.write_text(control_plane.admin_kubeconfig.read_text().replace(
        control_plane.url, "https://127.0.0.1:1"))
    for command in ("status", "queues", "why"):
        args = (command, "some-pod") if command == "why" else (command,)
        error = one_line_error(plugin(*args, kubeconfig=nowhere))
        assert "cannot reach the apiserver at https://127.0.0.1:1" in error

    stranger = control_plane.kubeconfig_for("stranger")
    error = one_line_error(plugin("status", kubeconfig=stranger))
    assert error.startswith("kubectl airlock: forbidden: "), error
    assert "stranger" in error

    # A cluster without Airlock's policy ConfigMap: Airlock is not installed there.
    error = one_line_error(plugin("queues", kubeconfig=control_plane.admin_kubeconfig))
    assert f"no ConfigMap {SYSTEM_NAMESPACE}/{POLICY_CONFIGMAP} (is Airlock installed?" in error


def _viewer_rbac() -> list[dict[str, Any]]:
    """The ClusterRole and Role docs/kubectl-plugin.md gives the plugin's readers."""
    page = (ROOT / "docs" / "kubectl-plugin.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", page, re.DOTALL)
                if "name: airlock-viewer" in b]
    return documents(block)


@pytest.mark.usefixtures("airlock", "cluster_policy")
async def test_the_rights_the_docs_grant_are_enough(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane) -> None:
    rbac = client.RbacAuthorizationV1Api(api)
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "viewer"}]
    for doc in _viewer_rbac():
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": doc["kind"],
               "name": doc["metadata"]["name"]}
        binding = {"metadata": dict(doc["metadata"]), "roleRef": ref, "subjects": subject}
        if doc["kind"] == "ClusterRole":
            await rbac.create_cluster_role(body=doc)
            await rbac.create_cluster_role_binding(body=binding)
        else:
            await rbac.create_namespaced_role(SYSTEM_NAMESPACE, body=doc)
            await rbac.create_namespaced_role_binding(SYSTEM_NAMESPACE, body=binding)
    try:
        await create_gang(api, namespace, "seen", TOO_BIG)
        await until(lambda: _gated(api, namespace, TOO_BIG), within=30)
        viewer = control_plane.kubeconfig_for("viewer")

        async def reads() -> bool:
            # Back once the apiserver's authorizer has the new objects.
            return plugin("queues", kubeconfig=viewer).returncode == 0

        await until(reads, within=30)
        for command in (("status",), ("why", "seen-0", "-n", namespace)):
            done = plugin(*command, kubeconfig=viewer)
            assert done.returncode == 0, done.stderr
            assert done.stderr == ""
        assert "Reason:   NeverFits" in done.stdout
    finally:
        await rbac.delete_cluster_role_binding("airlock-viewer")
        await rbac.delete_cluster_role("airlock-viewer")
        await rbac.delete_namespaced_role_binding("airlock-viewer", SYSTEM_NAMESPACE)
        await rbac.delete_namespaced_role("airlock-viewer", SYSTEM_NAMESPACE)



@pytest.mark.usefixtures("airlock", "cluster_policy")
async def test_why_of_a_gang_only_its_owner_sizes_tells_the_controllers_last_word(
        api: client.ApiClient, namespace: str, control_plane: ControlPlane,
        controllers: Controllers) -> None:
    # An Indexed Job's gang is as large as the Job's parallelism: the controller reads
    # it off the Job, the dry run does not, so `why` tells what the controller last said.
    controllers.start()
    worker = template(gpus=8)
    worker["spec"]["restartPolicy"] = "Never"
    await client.BatchV1Api(api).create_namespaced_job(namespace, body={
        "metadata": {"name": "wide-job"},
        "spec": {"parallelism": TOO_BIG, "completions": TOO_BIG, "completionMode": "Indexed",
                 "template": worker}})
    await until(lambda: _gated(api, namespace, TOO_BIG), within=60)

    async def told() -> bool:
        why = plugin("why", "job/wide-job", "-n", namespace,
                     kubeconfig=control_plane.admin_kubeconfig)
        return "Last event: NeverFits: " in why.stdout

    await until(told, within=60)
    why = plugin("why", "job/wide-job", "-n", namespace, kubeconfig=control_plane.admin_kubeconfig)
    assert why.stdout.startswith(f"job {namespace}/wide-job\nGang:       {namespace}/wide-job\n"
                                 f"Pods:       {TOO_BIG}\n"), why.stdout
