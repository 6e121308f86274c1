"""The Helm chart (deploy/helm/airlock) against the kustomize install it mirrors. The chart
reads deploy/base and the cert-manager overlay through links and renders the resources
their kustomizations list: with its default values `helm template` renders the objects
`kubectl kustomize deploy/overlays/cert-manager` renders, field by field (with
cert-manager off, those of the no-cert-manager overlay; `squeezed` and `unplaced` say the
two things normalized, both kustomize's doing), `helm lint --strict` passes, its values
take effect, its package carries deploy/'s files and the policy files, and the real Helm
installs it into a control plane of its own, where cert-manager issues the webhook's
certificate and injects its CA. Each value is rendered and checked: those of the pods and the
webhooks against the default render with exactly their fields changed, the observability
switches against what kustomize renders of deploy/observability.

Helm and kubectl are the harness's, built from their pinned modules: the real tools
decide what both installs are, so this runs at the level that has the binaries.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import difflib
import os
import re
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_asyncio import client

from tests.kube import (
    CLUSTER_SCOPED,
    documents,
    kubectl,
    kustomize,
    one,
    prerequisite_missing,
    progress,
    until,
)
from tests.paths import POLICIES, ROOT
from webhook.keys import SYSTEM_NAMESPACE
from webhook.policy.loading import policy_files
from webhook.sandbox.binaries import HELM_VERSION, Binaries
from webhook.sandbox.clients import from_kubeconfig
from webhook.sandbox.controlplane import ControlPlane
from webhook.sandbox.operating import RunningCommand, build_operators, start_operators, stop
from webhook.sandbox.operators import CERT_MANAGER, OperatorError

pytestmark = pytest.mark.e2e

CHART = ROOT / "deploy" / "helm" / "airlock"
RELEASE = "airlock"
# The overlay each set of values stands for.
VARIANTS: dict[str, list[str]] = {
    "cert-manager": [],
    "no-cert-manager": ["--set", "certManager.enabled=false"],
}
WEBHOOK_CONFIGURATIONS = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")

Doc = dict[str, Any]
Docs = list[Doc]
Key = tuple[str, str, str]


@dataclass(frozen=True)
class Helm:
    """The harness's helm, with a home of its own: nothing read from or written to the
    user's Helm configuration, repositories or kubeconfig."""

    binary: Path
    home: Path

    def __call__(self, *args: str, kubeconfig: Path | None = None,
                 check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.home),
               **{f"HELM_{part}_HOME": str(self.home / part.lower())
                  for part in ("CACHE", "CONFIG", "DATA")}}
        cluster = ["--kubeconfig", str(kubeconfig)] if kubeconfig else []
        out = subprocess.run([str(self.binary), *args, *cluster], env=env,
                             capture_output=True, text=True, timeout=180, check=False)
        if check:
            assert out.returncode == 0, f"helm {' '.join(args)}:\n{out.stderr}"
        return out

    def template(self, *values: str, chart: Path = CHART) -> Docs:
        return documents(self("template", RELEASE, str(chart), "--namespace", SYSTEM_NAMESPACE,
                              *values).stdout)


@pytest.fixture(scope="module")
def run_helm(helm: Path, tmp_path_factory: pytest.TempPathFactory) -> Helm:
    return Helm(helm, tmp_path_factory.mktemp("helm-home"))


# --- the chart renders what kustomize renders -----------------------------------------

# Fields of expressions, which deploy/ writes as folded scalars: CEL, which the Kubernetes
# API reads (webhook matchConditions, admission policies), and PromQL (PrometheusRules).
EXPRESSIONS = frozenset({"expression", "messageExpression", "valueExpression", "expr"})


def squeezed(value: Any, field: str = "") -> Any:
    """The value with each doubled line break in its expressions made one. deploy/ writes
    CEL and PromQL as folded (`>-`) scalars with more-indented lines; kustomize's YAML
    library (go-yaml v3) reads the line break before a more-indented line as two, where the
    YAML spec, Helm's `fromYaml` (go-yaml v2) reading the same file and PyYAML read one.
    Every other character of an expression must match, indentation included."""
    if isinstance(value, dict):
        return {k: squeezed(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [squeezed(v, field) for v in value]
    if field in EXPRESSIONS and isinstance(value, str):
        return value.replace("\n\n", "\n")
    return value


def unplaced(doc: Doc) -> Doc:
    """The object without a namespace if its kind has none. kustomize's built-in schema
    predates ValidatingAdmissionPolicy and its binding, so its namespace transformer
    takes them for namespaced kinds and sets `namespace: airlock-system`, which the
    apiserver ignores on a cluster-scoped object; the chart writes none."""
    if doc["kind"] not in CLUSTER_SCOPED:
        return doc
    return {**doc, "metadata": {k: v for k, v in doc["metadata"].items() if k != "namespace"}}


def keyed(docs: Docs) -> dict[Key, Doc]:
    """Each object by (kind, namespace, name), in that order, normalized as `unplaced`
    and `squeezed` say; nothing else is dropped or changed."""
    out: dict[Key, Doc] = {}
    for doc in map(unplaced, docs):
        key = (doc["kind"], doc["metadata"].get("namespace", ""), doc["metadata"]["name"])
        assert key not in out, f"{'/'.join(key)} rendered twice"
        out[key] = squeezed(doc)
    return dict(sorted(out.items()))


def differences(kustomized: Docs, charted: Docs) -> str:
    """A unified diff, object by object; empty when both render the same objects."""
    want, have = keyed(kustomized), keyed(charted)
    lines: list[str] = []
    for key in sorted(want.keys() | have.keys()):
        name = "/".join(part for part in key if part)
        before, after = (yaml.safe_dump(side[key], sort_keys=True).splitlines()
                         if key in side else [] for side in (want, have))
        lines += difflib.unified_diff(before, after, f"kustomize {name}", f"helm {name}",
                                      lineterm="")
    return "\n".join(lines)


@pytest.mark.parametrize("overlay", VARIANTS)
def test_the_chart_renders_what_kustomize_renders(run_helm: Helm, binaries: Binaries,
                                                  overlay: str) -> None:
    kustomized = kustomize(binaries.kubectl, ROOT / "deploy" / "overlays" / overlay)
    diff = differences(kustomized, run_helm.template(*VARIANTS[overlay]))
    assert not diff, (f"deploy/helm/airlock renders other objects than "
                      f"deploy/overlays/{overlay} (- kustomize, + helm); the chart reads "
                      f"deploy/ itself, so make deploy/helm/airlock/templates/objects.yaml "
                      f"do what kustomize does:\n{diff}")


def test_the_chart_reads_deploy_and_the_policies_through_links() -> None:
    """No second copy of a manifest: the chart's base/, cert-manager/ and policies/ are
    the repository's own directories, and its templates are the one that renders them,
    the helpers and the notes."""
    for link, target in (("base", "deploy/base"),
                         ("cert-manager", "deploy/overlays/cert-manager"),
                         ("observability", "deploy/observability"),
                         ("policies", "policies")):
        assert (CHART / link).is_symlink(), link
        assert (CHART / link).resolve() == (ROOT / target).resolve(), link
    assert {p.name for p in (CHART / "templates").iterdir()} == {
        "objects.yaml", "_helpers.tpl", "NOTES.txt"}


def test_a_difference_shows_as_a_readable_diff() -> None:
    """The diff names the object and the field, so a drift says what to change."""
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "airlock-webhook", "namespace": SYSTEM_NAMESPACE},
                  "spec": {"replicas": 3}}
    extra = {"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": "only-in-helm", "namespace": SYSTEM_NAMESPACE}}
    diff = differences([deployment], [{**deployment, "spec": {"replicas": 2}}, extra])
    assert "--- kustomize Deployment/airlock-system/airlock-webhook" in diff
    assert "-  replicas: 3\n+  replicas: 2" in diff
    assert "+++ helm ConfigMap/airlock-system/only-in-helm" in diff
    assert not differences([deployment], [deployment])


def test_only_doubled_breaks_in_cel_and_namespaces_of_cluster_scoped_kinds_are_normalized(
        ) -> None:
    def policy(expression: str, **metadata: str) -> Doc:
        return {"apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingAdmissionPolicy",
                "metadata": {"name": "airlock-marks", **metadata},
                "spec": {"validations": [{"expression": expression}]}}

    assert not differences([policy("a &&\n\n  b", namespace=SYSTEM_NAMESPACE)],
                           [policy("a &&\n  b")])
    assert differences([policy("a &&\n  b")], [policy("a && b")])
    assert "-  - expression: a && b\n+  - expression: a || b" in differences(
        [policy("a && b")], [policy("a || b")])
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "airlock", "namespace": SYSTEM_NAMESPACE}}
    assert differences([quota], [{**quota, "metadata": {"name": "airlock"}}])


def test_helm_is_the_pinned_release(run_helm: Helm) -> None:
    assert run_helm("version", "--template", "{{ .Version }}").stdout == HELM_VERSION


@pytest.mark.parametrize("overlay", VARIANTS)
def test_helm_lint_passes(run_helm: Helm, overlay: str) -> None:
    out = run_helm("lint", "--strict", str(CHART), "--namespace", SYSTEM_NAMESPACE,
                   *VARIANTS[overlay])
    assert "1 chart(s) linted, 0 chart(s) failed" in out.stdout, out.stdout


# --- values ---------------------------------------------------------------------------

def container(docs: Docs, deployment: str) -> Doc:
    containers: Docs = one(docs, "Deployment", deployment)["spec"]["template"]["spec"][
        "containers"]
    (only,) = containers
    return only


def test_values_set_image_replicas_resources_quota_and_the_namespace(run_helm: Helm) -> None:
    digest = "sha256:" + "a" * 64
    docs = run_helm.template(
        "--set", "image.repository=registry.example.com/airlock",
        "--set", f"image.digest={digest}", "--set", "image.pullPolicy=Always",
        "--set", "webhook.replicas=5", "--set", "controller.replicas=1",
        "--set-string", "resourceQuota.hard.pods=8",
        "--set", "controller.resources.limits.memory=4Gi", "--set", "namespace.create=false")
    for name in ("airlock-webhook", "airlock-controller"):
        assert container(docs, name)["image"] == f"registry.example.com/airlock@{digest}"
        assert container(docs, name)["imagePullPolicy"] == "Always"
    assert one(docs, "Deployment", "airlock-webhook")["spec"]["replicas"] == 5
    assert one(docs, "Deployment", "airlock-controller")["spec"]["replicas"] == 1
    assert container(docs, "airlock-controller")["resources"] == {
        "requests": {"cpu": "100m", "memory": "256Mi"},
        "limits": {"cpu": "2", "memory": "4Gi"}}
    assert not [d for d in docs if d["kind"] == "Namespace"]
    assert one(docs, "ResourceQuota", "airlock-critical-pods")["spec"]["hard"]["pods"] == "8"
    short = run_helm("template", RELEASE, str(CHART), "--set", "webhook.replicas=5",
                     check=False)
    assert short.returncode != 0
    assert "resourceQuota.hard.pods is 7, and 5 webhook and 2 controller replicas need 9" \
        in short.stderr
    tagged = run_helm.template("--set", "image.tag=0.2.0")
    assert container(tagged, "airlock-webhook")["image"] == "ghcr.io/gpu-airlock/airlock:0.2.0"


@pytest.fixture(scope="module")
def default_render(run_helm: Helm) -> Docs:
    return run_helm.template()


# A change to one field of the default render: from the field's value there (None when it
# has none) to its value with the values given (None: the field is gone).
Change = Callable[[Any], Any]


def merged(extra: Mapping[str, Any]) -> Change:
    return lambda current: {**(current or {}), **extra}


def without(key: str) -> Change:
    return lambda current: {k: v for k, v in current.items() if k != key} or None


def appended(*items: Any) -> Change:
    return lambda current: [*(current or []), *items]


def becomes(value: Any) -> Change:
    return lambda _current: value


@dataclass(frozen=True)
class Valued:
    """Values, and the fields of the default render they change: (kind, name, path in the
    object, change). Nothing else may change."""

    values: dict[str, Any]
    changes: list[tuple[str, str, tuple[str | int, ...], Change]]

    @property
    def name(self) -> str:
        path, value = [], self.values
        while isinstance(value, dict) and len(value) == 1:
            (key, value), = value.items()
            path.append(key)
        return ".".join(path)


POD, POD_METADATA = ("spec", "template", "spec"), ("spec", "template", "metadata")
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "system",
              "effect": "NoSchedule"}
NODE_AFFINITY = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "node-role.example.com/system", "operator": "Exists"}]}]}}


def pod_values(component: str) -> list[Valued]:
    deployment = ("Deployment", f"airlock-{component}")

    def pod(option: str, values: Any, change: Change, field: tuple[str, ...] = ()) -> Valued:
        """`component.option`, which changes the pod spec's field of the same name unless
        another is given."""
        return Valued({component: {option: values}},
                      [(*deployment, field or (*POD, option), change)])

    return [
        pod("nodeSelector", {"node-role.example.com/system": "true"},
            merged({"node-role.example.com/system": "true"})),
        pod("nodeSelector", {"kubernetes.io/os": None}, without("kubernetes.io/os")),
        pod("tolerations", [TOLERATION], appended(TOLERATION)),
        pod("affinity", {"nodeAffinity": NODE_AFFINITY}, merged({"nodeAffinity": NODE_AFFINITY})),
        pod("affinity", {"podAntiAffinity": None}, without("podAntiAffinity")),
        pod("podLabels", {"example.com/team": "platform"},
            merged({"example.com/team": "platform"}), (*POD_METADATA, "labels")),
        pod("podAnnotations", {"example.com/owner": "platform"},
            merged({"example.com/owner": "platform"}), (*POD_METADATA, "annotations")),
        # As the API takes them: strings, though YAML (or --set) read a number.
        pod("podAnnotations", {"example.com/port": 8080},
            merged({"example.com/port": "8080"}), (*POD_METADATA, "annotations")),
    ]


def webhook_values(option: str, kind: str, webhooks: int) -> Valued:
    """The option sets every webhook of its configuration (the mutating one has the pods'
    and the DRA claims')."""
    return Valued({option: {"failurePolicy": "Fail", "timeoutSeconds": 10}},
                  [change for i in range(webhooks) for change in (
                      (kind, "airlock", ("webhooks", i, "failurePolicy"), becomes("Fail")),
                      (kind, "airlock", ("webhooks", i, "timeoutSeconds"), becomes(10)))])


SECRET = {"name": "registry-credentials"}
VALUED = [
    *pod_values("webhook"),
    *pod_values("controller"),
    Valued({"imagePullSecrets": [SECRET]},
           [("Deployment", f"airlock-{component}", (*POD, "imagePullSecrets"), appended(SECRET))
            for component in ("webhook", "controller")]),
    webhook_values("mutatingWebhook", "MutatingWebhookConfiguration", 2),
    webhook_values("validatingWebhook", "ValidatingWebhookConfiguration", 1),
]


@pytest.mark.parametrize("valued", VALUED, ids=[f"{v.name}-{i}" for i, v in enumerate(VALUED)])
def test_a_value_changes_its_fields_and_nothing_else(
        run_helm: Helm, default_render: Docs, tmp_path: Path, valued: Valued) -> None:
    want = copy.deepcopy(default_render)
    for kind, name, path, change in valued.changes:
        parent: Any = one(want, kind, name)
        for step in path[:-1]:
            parent = parent[step]
        field = path[-1]
        before = parent.get(field)
        after = change(before)
        assert after != before, f"{valued.name}: the row changes nothing"
        if after is None:
            del parent[field]
        else:
            parent[field] = after
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(valued.values))
    diff = differences(want, run_helm.template("-f", str(values)))
    assert not diff, f"{valued.values} renders other than expected (- expected, + helm):\n{diff}"


@pytest.mark.parametrize(("values", "refusal"), [
    ({"webhook": {"podLabels": {"app.kubernetes.io/name": "mine"}}},
     "webhook.podLabels.app.kubernetes.io/name: deploy/base sets this label on the pods"),
    ({"controller": {"podLabels": {"app.kubernetes.io/part-of": "mine"}}},
     "controller.podLabels.app.kubernetes.io/part-of: deploy/base sets this label on the pods"),
    ({"mutatingWebhook": {"failurePolicy": "Never"}},
     "mutatingWebhook.failurePolicy is Never: Ignore or Fail"),
    ({"validatingWebhook": {"timeoutSeconds": 31}},
     "validatingWebhook.timeoutSeconds is 31: a whole number of seconds from 1 to 30"),
    ({"validatingWebhook": {"timeoutSeconds": 0}},
     "validatingWebhook.timeoutSeconds is 0: a whole number of seconds from 1 to 30"),
    ({"mutatingWebhook": {"timeoutSeconds": 2.5}},
     "mutatingWebhook.timeoutSeconds is 2.5: a whole number of seconds from 1 to 30"),
])
def test_values_the_cluster_would_refuse_or_that_break_selectors_are_refused(
        run_helm: Helm, tmp_path: Path, values: dict[str, Any], refusal: str) -> None:
    file = tmp_path / "values.yaml"
    file.write_text(yaml.safe_dump(values))
    out = run_helm("template", RELEASE, str(CHART), "-f", str(file), check=False)
    assert out.returncode != 0
    assert refusal in out.stderr, out.stderr


# Each observability switch, and the kinds of deploy/observability it renders.
SWITCHES = {"serviceMonitor": "ServiceMonitor", "prometheusRule": "PrometheusRule",
            "grafana": "ConfigMap"}


@pytest.mark.parametrize("switches", [[s] for s in SWITCHES] + [list(SWITCHES)],
                         ids=lambda s: "+".join(s))
def test_observability_switches_add_what_kustomize_renders_of_deploy_observability(
        run_helm: Helm, binaries: Binaries, switches: list[str]) -> None:
    overlay = kustomize(binaries.kubectl, ROOT / "deploy" / "overlays" / "cert-manager")
    observability = kustomize(binaries.kubectl, ROOT / "deploy" / "observability")
    added = [d for d in observability if d["kind"] in {SWITCHES[s] for s in switches}]
    assert added, f"deploy/observability renders nothing {switches} would switch on"
    charted = run_helm.template(*(a for s in switches for a in ("--set", f"{s}.enabled=true")))
    diff = differences(overlay + added, charted)
    assert not diff, (f"with {switches} on, the chart renders other than "
                      "deploy/overlays/cert-manager and the objects of those kinds of "
                      f"deploy/observability (- kustomize, + helm):\n{diff}")


def values_leaves(values: Mapping[str, Any], prefix: str = "") -> set[str]:
    """The dotted name of each value: a map's keys, down to what is not a map or is one
    the user fills ({} by default)."""
    return {name for key, value in values.items()
            for name in (values_leaves(value, f"{prefix}{key}.")
                         if isinstance(value, dict) and value else {f"{prefix}{key}"})}


def test_every_value_is_in_the_install_docs() -> None:
    text = (ROOT / "docs" / "install.md").read_text()
    table = text[text.index("| value | default | what it sets |"):]
    rows = table[:table.index("\n\n")].splitlines()[2:]
    documented = {name for row in rows for name in re.findall(r"`([^`]+)`", row.split("|")[1])}
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert documented == values_leaves(values)


def test_policy_files_are_replaced_added_or_alone(run_helm: Helm, tmp_path: Path) -> None:
    teams = tmp_path / "teams.yaml"
    teams.write_text("# a team's queue\napiVersion: gpu-airlock.io/v1alpha1\n")
    defaults = {p.name: p.read_text() for p in policy_files(POLICIES)}
    added = one(run_helm.template("--set-file", f"policies.30-teams\\.yaml={teams}",
                                  "--set-file", f"policies.20-rules\\.yaml={teams}"),
                "ConfigMap", "airlock-policies")["data"]
    assert added == {**defaults, "30-teams.yaml": teams.read_text(),
                     "20-rules.yaml": teams.read_text()}
    alone = one(run_helm.template("--set", "defaultPolicies=false",
                                  "--set-file", f"policies.30-teams\\.yaml={teams}"),
                "ConfigMap", "airlock-policies")["data"]
    assert alone == {"30-teams.yaml": teams.read_text()}
    empty = run_helm("template", RELEASE, str(CHART), "--set", "defaultPolicies=false",
                     check=False)
    assert empty.returncode != 0
    assert "no policy files" in empty.stderr


def test_without_cert_manager_the_ca_bundle_goes_into_both_configurations(
        run_helm: Helm) -> None:
    ca = base64.b64encode(b"-----BEGIN CERTIFICATE-----\n").decode()
    docs = run_helm.template("--set", "certManager.enabled=false",
                             "--set", f"webhook.caBundle={ca}")
    for kind in WEBHOOK_CONFIGURATIONS:
        config = one(docs, kind, "airlock")
        assert "annotations" not in config["metadata"]
        assert {h["clientConfig"]["caBundle"] for h in config["webhooks"]} == {ca}
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]
    both = run_helm("template", RELEASE, str(CHART), "--set", f"webhook.caBundle={ca}",
                    check=False)
    assert both.returncode != 0
    assert "cainjector would overwrite it" in both.stderr


def test_the_package_carries_deploy_and_the_policy_files_and_renders_the_same(
        run_helm: Helm, tmp_path: Path) -> None:
    """The chart's base/, cert-manager/ and policies/ are links: `helm package` must
    store the files themselves (of policies/, only the policy files and the kustomization
    that names them), or a chart pulled from a registry would render nothing or an empty
    policy."""
    run_helm("package", str(CHART), "--destination", str(tmp_path))
    (archive,) = tmp_path.glob("airlock-*.tgz")
    with tarfile.open(archive) as tar:
        def carried(folder: str) -> dict[str, bytes]:
            return {Path(n).name: tar.extractfile(n).read()  # type: ignore[union-attr]
                    for n in tar.getnames() if n.startswith(f"airlock/{folder}/")}

        policies, base, overlay, observability = (
            carried(f) for f in ("policies", "base", "cert-manager", "observability"))
    kustomization = POLICIES / "kustomization.yaml"
    assert policies == {p.name: p.read_bytes()
                        for p in [*policy_files(POLICIES), kustomization]}
    for files, directory in ((base, "base"), (overlay, "overlays/cert-manager"),
                             (observability, "observability")):
        assert files == {p.name: p.read_bytes()
                         for p in (ROOT / "deploy" / directory).iterdir()}, directory
    assert keyed(run_helm.template(chart=archive)) == keyed(run_helm.template())


# --- installed by the real Helm -------------------------------------------------------

@pytest.fixture(scope="module")
def cluster(binaries: Binaries, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[ControlPlane]:
    """A control plane of its own, with cert-manager running: the shared one already
    holds the suite's Airlock (airlock-system, the PriorityClasses, webhook
    configurations named `airlock` that call a loopback URL), which an install would
    take over from the tests after this one."""
    try:
        build_operators([CERT_MANAGER], progress)
    except OperatorError as e:
        prerequisite_missing(f"cert-manager is not built: {e}")
    plane = ControlPlane(binaries).start()
    running: list[RunningCommand] = []
    try:
        running = start_operators([CERT_MANAGER], tmp_path_factory.mktemp("cert-manager"),
                                  plane.admin_kubeconfig, plane.pki.ca, progress)
        yield plane
    finally:
        stop(running)
        plane.remove()


@pytest.fixture(scope="module")
def installed(run_helm: Helm, binaries: Binaries, cluster: ControlPlane) -> Docs:
    """The objects of the release, installed as docs/install.md says. Helm does not wait
    for the Deployments' pods (never Ready here: no kubelet, no image)."""
    kubectl(binaries.kubectl, "create", "namespace", SYSTEM_NAMESPACE,
            kubeconfig=cluster.admin_kubeconfig)
    started = time.monotonic()
    run_helm("install", RELEASE, str(CHART), "--namespace", SYSTEM_NAMESPACE, "--take-ownership",
             kubeconfig=cluster.admin_kubeconfig)
    print(f"helm install took {time.monotonic() - started:.1f}s")
    return documents(run_helm("get", "manifest", RELEASE, "--namespace", SYSTEM_NAMESPACE,
                              kubeconfig=cluster.admin_kubeconfig).stdout)


def missing_from(rendered: Any, live: Any, path: str = "") -> list[str]:
    """Where the live object lacks or changed what was rendered; what the apiserver
    added (defaults, status, the caBundle cainjector wrote) is no difference, and a zero
    value (false, an empty list or map) may be left out, as the API's JSON omits it."""
    if isinstance(rendered, dict) and isinstance(live, dict):
        return [p for key, value in rendered.items()
                for p in (missing_from(value, live[key], f"{path}.{key}") if key in live
                          else [] if not value else [f"{path}.{key}"])]
    if isinstance(rendered, list) and isinstance(live, list) and len(rendered) == len(live):
        return [p for i, (r, v) in enumerate(zip(rendered, live, strict=True))
                for p in missing_from(r, v, f"{path}[{i}]")]
    return [] if rendered == live else [f"{path}: {rendered!r} became {live!r}"]


# cert-manager v1.11.5, the newest whose binaries the module proxy serves
# (docs/operators.md), is built on Kubernetes 1.26's API, which has no matchConditions: its
# cainjector writes each webhook configuration back without them. docs/install.md asks
# users for v1.12 or newer, built on 1.27's API, which has the field.
def dropped_by_cainjector(rendered: Mapping[Key, Doc]) -> dict[str, list[str]]:
    dropped = {"/".join(key): [f".webhooks[{i}].matchConditions"
                               for i, hook in enumerate(doc["webhooks"])
                               if "matchConditions" in hook]
               for key, doc in rendered.items() if key[0].endswith("WebhookConfiguration")}
    return {key: paths for key, paths in dropped.items() if paths}


async def test_helm_installs_the_objects_kustomize_would(
        installed: Docs, run_helm: Helm, binaries: Binaries, cluster: ControlPlane) -> None:
    """Read once cainjector has written its CA, so what it rewrites is seen every time."""
    assert keyed(installed) == keyed(run_helm.template())
    await ca_injected(installed, cluster)
    live = documents(kubectl(binaries.kubectl, "get", "-o", "yaml", "-f", "-",
                             kubeconfig=cluster.admin_kubeconfig,
                             stdin=yaml.safe_dump_all(installed)).stdout)[0]["items"]
    rendered, stored = keyed(installed), keyed(live)
    assert stored.keys() == rendered.keys()
    changed = {"/".join(key): missing_from(rendered[key], stored[key]) for key in rendered}
    assert {key: paths for key, paths in changed.items() if paths} == \
        dropped_by_cainjector(rendered)
    for key, doc in stored.items():
        assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm", key
        assert doc["metadata"]["annotations"]["meta.helm.sh/release-name"] == RELEASE, key


async def ca_injected(installed: Docs, cluster: ControlPlane) -> None:
    """Until the Secret the webhook Deployment mounts is issued and cainjector has put its
    CA into every webhook of both configurations."""
    mounted = {v["secret"]["secretName"]
               for v in one(installed, "Deployment", "airlock-webhook")["spec"]["template"]
               ["spec"]["volumes"] if "secret" in v}
    async with await from_kubeconfig(cluster.admin_kubeconfig) as api:
        core = client.CoreV1Api(api)
        admission = client.AdmissionregistrationV1Api(api)

        async def issued() -> bool:
            secrets = (await (await core.list_namespaced_secret(
                SYSTEM_NAMESPACE, _preload_content=False)).json())["items"]
            return mounted <= {s["metadata"]["name"] for s in secrets}

        await until(issued, within=60)
        (secret,) = mounted
        ca = (await (await core.read_namespaced_secret(
            secret, SYSTEM_NAMESPACE, _preload_content=False)).json())["data"]["ca.crt"]

        async def injected() -> bool:
            configs = await asyncio.gather(
                admission.read_mutating_webhook_configuration(RELEASE, _preload_content=False),
                admission.read_validating_webhook_configuration(RELEASE,
                                                                _preload_content=False))
            bundles = [h["clientConfig"].get("caBundle") for c in configs
                       for h in (await c.json())["webhooks"]]
            return len(bundles) == 3 and set(bundles) == {ca}

        await until(injected, within=60)


async def test_cert_manager_issues_the_certificate_and_injects_its_ca(
        installed: Docs, cluster: ControlPlane) -> None:
    """The chart's CA chain works: the Secret the webhook Deployment mounts is issued,
    and cainjector puts its CA into every webhook of both configurations."""
    await ca_injected(installed, cluster)


def test_the_release_owns_the_namespace_with_its_labels(
        installed: Docs, binaries: Binaries, cluster: ControlPlane) -> None:
    """`kubectl create namespace` then `helm install --take-ownership`: the namespace
    Helm keeps its release in gets the chart's labels (restricted Pod Security)."""
    stored = kubectl(binaries.kubectl, "get", "namespace", SYSTEM_NAMESPACE, "-o", "yaml",
                     kubeconfig=cluster.admin_kubeconfig).stdout
    labels = yaml.safe_load(stored)["metadata"]["labels"]
    namespace = one(installed, "Namespace", SYSTEM_NAMESPACE)
    assert labels.items() >= namespace["metadata"]["labels"].items()
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
