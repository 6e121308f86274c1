"""The install against a real kube-apiserver: every object of the rendered overlays passes
a server-side dry-run apply (schema, defaulting, validation, admission), the pods pass
the restricted Pod Security Standard, and the RBAC, applied for real, answers
`kubectl auth can-i` as docs/security.md says.

cert-manager's kinds are left out of the dry-run (the test apiserver has no cert-manager
CRDs); tests/unit/test_manifests.py checks them against cert-manager's documented fields.
"""

from __future__ import annotations

import functools
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any, Protocol

import pytest
import yaml

from tests import kube
from tests.commands import installed_airlock
from tests.paths import ROOT
from webhook.sandbox.binaries import Binaries
from webhook.sandbox.controlplane import ControlPlane

pytestmark = pytest.mark.e2e

SCRIPT = ROOT / "scripts" / "install-no-cert-manager.sh"
CONTROLLER = "system:serviceaccount:airlock-system:airlock-controller"
WEBHOOK = "system:serviceaccount:airlock-system:airlock-webhook"
RBAC_KINDS = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}

Doc = dict[str, Any]


class Kubectl(Protocol):
    def __call__(self, *args: str, stdin: str | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]: ...


@pytest.fixture(scope="module")
def kubectl(binaries: Binaries, control_plane: ControlPlane) -> Kubectl:
    """kubectl as the control plane's admin."""
    return functools.partial(kube.kubectl, binaries.kubectl,
                             kubeconfig=control_plane.admin_kubeconfig)


def dump(docs: list[Doc]) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


@pytest.fixture(scope="module")
def namespace_exists(kubectl: Kubectl) -> None:
    """Namespaced objects are dry-run into an existing namespace. It is made without the
    install's labels, as the rest of the end-to-end suite makes it."""
    out = kubectl("create", "namespace", "airlock-system", check=False)
    assert out.returncode == 0 or "AlreadyExists" in out.stderr, out.stderr


@pytest.fixture(scope="module")
def no_cert_manager_install(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
                            ) -> list[Doc]:
    """What scripts/install-no-cert-manager.sh applies: the overlay, the Secret and the
    caBundle patches."""
    airlock = installed_airlock()
    assert airlock is not None, "the airlock command is not installed"
    out = subprocess.run(
        [str(SCRIPT), "--render", str(tmp_path_factory.mktemp("install") / "certs")],
        env={"PATH": "/usr/bin:/bin", "KUBECTL": str(binaries.kubectl),
             "AIRLOCK": str(airlock)},
        capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    return kube.documents(out.stdout)


WEBHOOK_KINDS = {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}


def dry_run_apply(kubectl: Kubectl, docs: list[Doc]) -> list[str]:
    # The suite's live webhook configurations are also named `airlock` (with a loopback
    # url); an apply would merge into them and hold both url and service. Dry-run the
    # install's under a name of their own.
    docs = [{**d, "metadata": {**d["metadata"], "name": "airlock-dry-run"}}
            if d["kind"] in WEBHOOK_KINDS else d for d in docs]
    out = kubectl("apply", "--server-side", "--dry-run=server", "--force-conflicts",
                  "--field-manager=airlock-e2e", "-f", "-", stdin=dump(docs))
    return [line for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.usefixtures("namespace_exists")
def test_no_cert_manager_install_passes_a_server_side_dry_run(
        kubectl: Kubectl, no_cert_manager_install: list[Doc]) -> None:
    lines = dry_run_apply(kubectl, no_cert_manager_install)
    assert len(lines) == len(no_cert_manager_install)
    assert all(line.endswith("(server dry run)") for line in lines), lines
    kinds = {d["kind"] for d in no_cert_manager_install}
    assert {"Deployment", "Secret", "MutatingWebhookConfiguration",
            "ValidatingWebhookConfiguration", "NetworkPolicy", "PodDisruptionBudget",
            "PriorityClass", "ConfigMap"} <= kinds


@pytest.mark.usefixtures("namespace_exists")
def test_cert_manager_install_passes_without_the_cert_manager_kinds(
        kubectl: Kubectl, binaries: Binaries) -> None:
    docs = kube.kustomize(binaries.kubectl, ROOT / "deploy" / "overlays" / "cert-manager")
    ours = [d for d in docs if not d["apiVersion"].startswith("cert-manager.io/")]
    assert len(docs) - len(ours) == 4  # two Issuers, two Certificates
    lines = dry_run_apply(kubectl, ours)
    assert len(lines) == len(ours)


@pytest.fixture
def restricted_namespace(kubectl: Kubectl) -> Iterator[str]:
    name = f"pss-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)
    kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted",
            "gpu-airlock.io/ignore=true")
    kubectl("create", "serviceaccount", "default", "-n", name, check=False)
    yield name
    kubectl("delete", "namespace", name, "--wait=false", check=False)


def test_pods_pass_the_restricted_pod_security_standard(
        kubectl: Kubectl, no_cert_manager_install: list[Doc], restricted_namespace: str
) -> None:
    """PodSecurity only warns about Deployments; a Pod of each template is enforced."""
    for deploy in (d for d in no_cert_manager_install if d["kind"] == "Deployment"):
        template = deploy["spec"]["template"]
        spec = {k: v for k, v in template["spec"].items() if k != "serviceAccountName"}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": deploy["metadata"]["name"],
                            "namespace": restricted_namespace,
                            "labels": template["metadata"]["labels"]},
               "spec": spec}
        out = kubectl("apply", "--server-side", "--dry-run=server", "-f", "-",
                      stdin=dump([pod]), check=False)
        assert out.returncode == 0, out.stderr
        assert "violate" not in out.stderr, out.stderr


# --- the controller's RBAC, applied for real ------------------------------------------

@pytest.fixture(scope="module")
def rbac_applied(kubectl: Kubectl, namespace_exists: None,  # noqa: ARG001 (for its effect)
                 no_cert_manager_install: list[Doc]) -> None:
    docs = [d for d in no_cert_manager_install if d["kind"] in RBAC_KINDS]
    kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=airlock-e2e",
            "-f", "-", stdin=dump(docs))


def can_i(kubectl: Kubectl, user: str, *args: str) -> bool:
    """`kubectl auth can-i ... --as=USER`, for kinds the apiserver serves."""
    out = kubectl("auth", "can-i", *args, f"--as={user}", check=False)
    answer = out.stdout.strip()
    assert answer in ("yes", "no"), out.stderr
    return answer == "yes"


@pytest.mark.usefixtures("rbac_applied")
def test_kubectl_auth_can_i_agrees(kubectl: Kubectl) -> None:
    """What an operator would type to check the install (tests/e2e/test_rbac.py asks
    about every grant, and what lies next to each)."""
    assert can_i(kubectl, CONTROLLER, "patch", "pods", "-n", "team-a")
    assert can_i(kubectl, CONTROLLER, "create", "pods", "--subresource=eviction", "-n",
                 "team-a")
    assert not can_i(kubectl, CONTROLLER, "delete", "pods", "-n", "team-a")
    assert can_i(kubectl, CONTROLLER, "update", "leases/airlock-controller", "-n",
                 "airlock-system")
    assert not can_i(kubectl, CONTROLLER, "update", "leases", "-n", "airlock-system")
    assert can_i(kubectl, CONTROLLER, "get", "secrets/airlock-record-key", "-n",
                 "airlock-system")
    assert not can_i(kubectl, CONTROLLER, "get", "secrets", "-n", "airlock-system")
    assert not can_i(kubectl, WEBHOOK, "get", "secrets", "-n", "airlock-system")
    assert not can_i(kubectl, CONTROLLER, "delete", "nodes")
    assert not can_i(kubectl, WEBHOOK, "get", "pods", "-A")


@pytest.mark.usefixtures("airlock")
def test_emergency_removal_command_names_both_configurations(kubectl: Kubectl) -> None:
    """The command docs/operations.md gives, as a server-side dry run against the
    configurations the sandbox installed (their names are the install's)."""
    out = kubectl("delete", "--dry-run=server", "mutatingwebhookconfiguration/airlock",
                  "validatingwebhookconfiguration/airlock")
    deleted = [line for line in out.stdout.splitlines() if "deleted" in line]
    assert len(deleted) == 2, out.stdout
