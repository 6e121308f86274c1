"""The install as kustomize renders it: every overlay builds, and the properties the docs
promise hold (scope, timeouts, failure policy, certificates, security, RBAC, image).

cert-manager's kinds cannot be served by the test apiserver without its CRDs, so they
are checked here against the fields cert-manager documents for `cert-manager.io/v1`.

kubectl (for `kubectl kustomize`) is the harness's: the real tool decides what the
overlays render to, so this runs at the level that has the real binaries.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.commands import installed_airlock
from tests.kube import find, kustomize, one
from tests.paths import POLICIES, ROOT
from webhook.keys import PLACEHOLDER_PRIORITY, PLACEHOLDER_PRIORITY_CLASS, SYSTEM_NAMESPACE
from webhook.policy.loading import load_policy, policy_files
from webhook.sandbox.binaries import Binaries, kubernetes_release

DEPLOY = ROOT / "deploy"
BUILDS = ["deploy/base", "deploy/overlays/cert-manager", "deploy/overlays/no-cert-manager",
          "deploy/observability", "policies"]
INSTALLS = ["deploy/overlays/cert-manager", "deploy/overlays/no-cert-manager"]
CERT_DIR, POLICY_DIR = "/etc/airlock/certs", "/etc/airlock/policies"
EMERGENCY_REMOVAL = ("kubectl delete mutatingwebhookconfiguration/airlock "
                     "validatingwebhookconfiguration/airlock")
SERVE_ARGS = ["serve", "--port", "8443", "--cert-dir", CERT_DIR, "--policies", POLICY_DIR,
              "--metrics-auth", "kubernetes"]

Doc = dict[str, Any]
Docs = list[Doc]


# --- rendering ------------------------------------------------------------------------

@pytest.fixture(scope="module")
def rendered(binaries: Binaries) -> dict[str, Docs]:
    return {path: kustomize(binaries.kubectl, ROOT / path) for path in BUILDS}


def webhooks(docs: Docs) -> Iterator[tuple[str, Doc]]:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for config in find(docs, kind):
            for hook in config["webhooks"]:
                yield kind, hook


def pod_spec(docs: Docs, deployment: str) -> Doc:
    spec: Doc = one(docs, "Deployment", deployment)["spec"]["template"]["spec"]
    return spec


# --- every build ----------------------------------------------------------------------

@pytest.mark.parametrize("path", BUILDS)
def test_every_kustomization_renders(rendered: dict[str, Docs], path: str) -> None:
    assert rendered[path]


@pytest.mark.parametrize("path", INSTALLS)
def test_every_namespaced_object_is_in_airlock_system(rendered: dict[str, Docs],
                                                      path: str) -> None:
    cluster_scoped = {"Namespace", "ClusterRole", "ClusterRoleBinding", "PriorityClass",
                      "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
    for doc in rendered[path]:
        if doc["kind"] not in cluster_scoped:
            assert doc["metadata"].get("namespace") == SYSTEM_NAMESPACE, doc["metadata"]["name"]
        assert doc["metadata"]["labels"]["app.kubernetes.io/part-of"] == "airlock"


# --- webhook configurations -----------------------------------------------------------

@pytest.mark.parametrize("path", INSTALLS)
def test_webhook_configurations_do_no_harm(rendered: dict[str, Docs], path: str) -> None:
    hooks = {hook["name"]: (kind, hook) for kind, hook in webhooks(rendered[path])}
    assert {(name, kind) for name, (kind, _) in hooks.items()} == {
        ("mutate.gpu-airlock.io", "MutatingWebhookConfiguration"),
        ("claims.gpu-airlock.io", "MutatingWebhookConfiguration"),
        ("validate.gpu-airlock.io", "ValidatingWebhookConfiguration")}
    for _, hook in hooks.values():
        exprs = {e["key"]: e for e in hook["namespaceSelector"]["matchExpressions"]}
        excluded = exprs["kubernetes.io/metadata.name"]
        assert excluded["operator"] == "NotIn"
        assert {"kube-system", SYSTEM_NAMESPACE} <= set(excluded["values"])
        assert exprs["gpu-airlock.io/ignore"] == {
            "key": "gpu-airlock.io/ignore", "operator": "NotIn", "values": ["true"]}
        assert 1 <= hook["timeoutSeconds"] <= 5
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        # Fail open, for the reasons docs/operations.md gives (and how to change it).
        assert hook["failurePolicy"] == "Ignore"
        assert hook["matchConditions"], "skip what Airlock has no say in, in the apiserver"
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            "airlock-webhook", SYSTEM_NAMESPACE, 443)
    paths = {name: hook["clientConfig"]["service"]["path"] for name, (_, hook) in hooks.items()}
    assert paths == {"mutate.gpu-airlock.io": "/mutate", "claims.gpu-airlock.io": "/claims",
                     "validate.gpu-airlock.io": "/validate"}
    rules = {name: hook["rules"] for name, (_, hook) in hooks.items()}
    for name in ("mutate.gpu-airlock.io", "validate.gpu-airlock.io"):
        (rule,) = rules[name]
        assert (rule["apiGroups"], rule["resources"]) == ([""], ["pods"])
    (claims,) = rules["claims.gpu-airlock.io"]
    assert claims["apiGroups"] == ["resource.k8s.io"]
    assert set(claims["resources"]) == {"resourceclaims", "resourceclaimtemplates"}
    # A claim is immutable once made: only its creation can be paired.
    assert claims["operations"] == ["CREATE"]
    mutate = hooks["mutate.gpu-airlock.io"][1]
    assert mutate["reinvocationPolicy"] == "IfNeeded"
    assert rules["mutate.gpu-airlock.io"][0]["operations"] == ["CREATE"]
    # UPDATE is what protects the gate from anyone but the controller.
    assert {"CREATE", "UPDATE"} <= set(rules["validate.gpu-airlock.io"][0]["operations"])


def test_the_service_reaches_the_webhook_port(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/base"]
    service = one(docs, "Service", "airlock-webhook")["spec"]
    (port,) = service["ports"]
    assert port["port"] == 443
    (container,) = pod_spec(docs, "airlock-webhook")["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports[port["targetPort"]] == 8443
    labels = one(docs, "Deployment", "airlock-webhook")["spec"]["template"]["metadata"]
    assert service["selector"].items() <= labels["labels"].items()


# --- cert-manager (checked against its documented fields) -----------------------------

# cert-manager.io/v1 Certificate spec fields, as cert-manager documents them.
CERTIFICATE_FIELDS = {
    "additionalOutputFormats", "commonName", "dnsNames", "duration", "emailAddresses",
    "encodeUsagesInRequest", "ipAddresses", "isCA", "issuerRef", "keystores",
    "literalSubject", "nameConstraints", "otherNames", "privateKey", "renewBefore",
    "renewBeforePercentage", "revisionHistoryLimit", "secretName", "secretTemplate",
    "subject", "uris", "usages",
}
ISSUER_TYPES = {"acme", "ca", "selfSigned", "vault", "venafi"}
KEY_USAGES = {
    "signing", "digital signature", "content commitment", "key encipherment",
    "key agreement", "data encipherment", "cert sign", "crl sign", "encipher only",
    "decipher only", "any", "server auth", "client auth", "code signing",
    "email protection", "s/mime", "ipsec end system", "ipsec tunnel", "ipsec user",
    "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc",
}
GO_DURATION = re.compile(r"^(\d+(\.\d+)?(h|m|s|ms|us|µs|ns))+$")


def test_cert_manager_kinds_use_only_documented_fields(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/overlays/cert-manager"]
    certs, issuers = find(docs, "Certificate"), find(docs, "Issuer")
    assert len(certs) == 2
    assert len(issuers) == 2
    for doc in certs + issuers:
        assert doc["apiVersion"] == "cert-manager.io/v1"
    for issuer in issuers:
        (kind,) = issuer["spec"]
        assert kind in ISSUER_TYPES
    for cert in certs:
        spec = cert["spec"]
        assert set(spec) <= CERTIFICATE_FIELDS, set(spec) - CERTIFICATE_FIELDS
        assert spec["secretName"]
        assert set(spec["issuerRef"]) <= {"name", "kind", "group"}
        assert spec["issuerRef"].get("kind", "Issuer") in {"Issuer", "ClusterIssuer"}
        assert spec["issuerRef"].get("group", "cert-manager.io") == "cert-manager.io"
        key = spec.get("privateKey", {})
        assert set(key) <= {"algorithm", "encoding", "rotationPolicy", "size"}
        assert key.get("algorithm", "RSA") in {"RSA", "ECDSA", "Ed25519"}
        assert key.get("rotationPolicy", "Always") in {"Never", "Always"}
        assert set(spec.get("usages", [])) <= KEY_USAGES
        for field in ("duration", "renewBefore"):
            if field in spec:
                assert GO_DURATION.match(spec[field]), f"{field}: {spec[field]!r}"
        assert isinstance(spec.get("isCA", False), bool)


def test_cert_manager_chain_issues_the_mounted_secret(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/overlays/cert-manager"]
    serving = one(docs, "Certificate", "airlock-webhook")["spec"]
    # serving Certificate <- CA Issuer <- CA Certificate <- self-signed Issuer
    ca_issuer = one(docs, "Issuer", serving["issuerRef"]["name"])["spec"]
    ca_cert = next(c["spec"] for c in find(docs, "Certificate")
                   if c["spec"]["secretName"] == ca_issuer["ca"]["secretName"])
    assert ca_cert["isCA"] is True
    assert ca_cert.get("commonName")
    root = one(docs, "Issuer", ca_cert["issuerRef"]["name"])["spec"]
    assert "selfSigned" in root
    assert serving.get("isCA", False) is False
    assert set(serving["dnsNames"]) >= {"airlock-webhook.airlock-system.svc",
                                        "airlock-webhook.airlock-system.svc.cluster.local"}
    assert "server auth" in serving["usages"]
    assert serving["secretName"] == "airlock-webhook-tls"
    volumes = {v["name"]: v for v in pod_spec(docs, "airlock-webhook")["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == serving["secretName"]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(docs, kind, "airlock")["metadata"]["annotations"]
        assert annotations["cert-manager.io/inject-ca-from"] == \
            f"{SYSTEM_NAMESPACE}/airlock-webhook"


def test_no_cert_manager_overlay_has_no_cert_manager(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/overlays/no-cert-manager"]
    assert not [d for d in docs if d["apiVersion"].startswith("cert-manager.io/")]
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(docs, kind, "airlock")["metadata"].get("annotations") or {}
        assert "cert-manager.io/inject-ca-from" not in annotations


def test_no_cert_manager_script_renders_secret_and_ca_bundle(binaries: Binaries,
                                                            tmp_path: Path) -> None:
    airlock = installed_airlock()
    if airlock is None:
        pytest.skip("the airlock command is not installed")
    env = {**os.environ, "KUBECTL": str(binaries.kubectl), "AIRLOCK": str(airlock)}
    script = ROOT / "scripts" / "install-no-cert-manager.sh"
    out = subprocess.run([str(script), "--render", str(tmp_path / "certs")], env=env,
                         capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    secret = one(docs, "Secret", "airlock-webhook-tls")
    assert secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key", "ca.crt"}
    ca = base64.b64decode(secret["data"]["ca.crt"])
    assert ca == (tmp_path / "certs" / "ca.crt").read_bytes()
    for _, hook in webhooks(docs):
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == ca
    # A rotation trusts the new and the previous CA while replicas pick up the new pair.
    rotated = subprocess.run([str(script), "--render", str(tmp_path / "certs")],
                             env={**env, "ROTATE": "1"}, capture_output=True, text=True,
                             timeout=120, check=False)
    assert rotated.returncode == 0, rotated.stderr
    for _, hook in webhooks([d for d in yaml.safe_load_all(rotated.stdout) if d]):
        bundle = base64.b64decode(hook["clientConfig"]["caBundle"])
        assert ca in bundle
        assert bundle.count(b"BEGIN CERTIFICATE") == 2


# --- workloads ------------------------------------------------------------------------

def assert_restricted(pod: Doc) -> None:
    """The restricted Pod Security Standard, and a read-only root filesystem."""
    pod_security = pod["securityContext"]
    assert pod_security["runAsNonRoot"] is True
    assert pod_security.get("runAsUser", 65532) != 0
    assert pod_security["seccompProfile"] == {"type": "RuntimeDefault"}
    assert not pod.get("hostNetwork")
    assert not pod.get("hostPID")
    assert not pod.get("hostIPC")
    for container in pod["containers"] + pod.get("initContainers", []):
        security = container["securityContext"]
        assert security["readOnlyRootFilesystem"] is True
        assert security["allowPrivilegeEscalation"] is False
        assert security["capabilities"]["drop"] == ["ALL"]
        assert not security["capabilities"].get("add")
        assert not security.get("privileged")
        assert security.get("runAsNonRoot", True) is True
        resources = container["resources"]
        assert resources["requests"]["cpu"]
        assert resources["requests"]["memory"]
        assert resources["limits"]["memory"]
        image = container["image"]
        assert ":" in image.rsplit("/", 1)[-1], image
        assert not image.endswith(":latest"), image


def test_webhook_deployment_is_available_and_locked_down(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/base"]
    deploy = one(docs, "Deployment", "airlock-webhook")
    selector = deploy["spec"]["selector"]["matchLabels"]
    pod = pod_spec(docs, "airlock-webhook")
    assert deploy["spec"]["replicas"] == 3
    anti = pod["affinity"]["podAntiAffinity"]
    terms = [t.get("podAffinityTerm", t) for key in (
        "requiredDuringSchedulingIgnoredDuringExecution",
        "preferredDuringSchedulingIgnoredDuringExecution") for t in anti.get(key, [])]
    assert any(t["topologyKey"] == "kubernetes.io/hostname"
               and t["labelSelector"]["matchLabels"] == selector for t in terms)
    pdb = one(docs, "PodDisruptionBudget", "airlock-webhook")["spec"]
    assert pdb["selector"]["matchLabels"] == selector
    assert pdb.get("maxUnavailable") == 1 or pdb.get("minAvailable", 0) >= 2

    assert pod["serviceAccountName"] == "airlock-webhook"
    # The token reviews who scrapes /metrics; no other pod of the account gets one.
    assert pod["automountServiceAccountToken"] is True
    assert one(docs, "ServiceAccount", "airlock-webhook")["automountServiceAccountToken"] \
        is False
    assert_restricted(pod)
    (container,) = pod["containers"]
    assert container["args"] == SERVE_ARGS
    probes = {"readinessProbe": "/readyz", "livenessProbe": "/healthz"}
    for probe, path in probes.items():
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], get["port"]) == (path, "HTTPS", "https")


@pytest.mark.parametrize("path", ["deploy/base", *INSTALLS])
def test_certificate_and_policies_are_directory_mounts(rendered: dict[str, Docs],
                                                       path: str) -> None:
    docs = rendered[path]
    pod = pod_spec(docs, "airlock-webhook")
    (container,) = pod["containers"]
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    for mount_path in (CERT_DIR, POLICY_DIR):
        mount = mounts[mount_path]
        # A subPath mount never sees the kubelet's ..data swap.
        assert "subPath" not in mount
        assert "subPathExpr" not in mount
        assert mount["readOnly"] is True
    assert volumes[mounts[CERT_DIR]["name"]]["secret"]["secretName"] == "airlock-webhook-tls"
    policies = volumes[mounts[POLICY_DIR]["name"]]["configMap"]
    assert "items" not in policies, "items would hide new policy files"
    one(docs, "ConfigMap", policies["name"])


def test_controller_deployment_runs_two_replicas_with_leader_election(
        rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/base"]
    deploy = one(docs, "Deployment", "airlock-controller")
    assert deploy["spec"]["replicas"] == 2
    pod = pod_spec(docs, "airlock-controller")
    assert pod["serviceAccountName"] == "airlock-controller"
    assert_restricted(pod)
    (container,) = pod["containers"]
    args = container["args"]
    assert args[0] == "controller"
    assert "--no-leader-election" not in args
    assert args[args.index("--namespace") + 1] == SYSTEM_NAMESPACE
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert int(args[args.index("--metrics-port") + 1]) == ports["metrics"] == 8080
    assert args[args.index("--identity") + 1] == "$(POD_NAME)"
    assert args[args.index("--metrics-auth") + 1] == "kubernetes"
    for probe in ("readinessProbe", "livenessProbe"):
        get = container[probe]["httpGet"]
        assert (get["path"], get["scheme"], get["port"]) == ("/healthz", "HTTPS", "metrics")
    env = {e["name"]: e for e in container["env"]}
    assert env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    one(docs, "PodDisruptionBudget", "airlock-controller")


@pytest.mark.parametrize("path", ["deploy/base", *INSTALLS])
def test_controller_reads_the_webhooks_policy_configmap(rendered: dict[str, Docs],
                                                       path: str) -> None:
    """Both count the same accelerators: the same ConfigMap, mounted the same way."""
    docs = rendered[path]
    mounted = {}
    for deployment in ("airlock-webhook", "airlock-controller"):
        pod = pod_spec(docs, deployment)
        (container,) = pod["containers"]
        args = container["args"]
        assert args[args.index("--policies") + 1] == POLICY_DIR
        (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == POLICY_DIR]
        assert "subPath" not in mount
        assert mount["readOnly"] is True
        (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
        assert "items" not in volume["configMap"]
        mounted[deployment] = volume["configMap"]["name"]
    assert mounted["airlock-controller"] == mounted["airlock-webhook"]


def test_network_policies_admit_the_apiserver_and_scrapes(rendered: dict[str, Docs]) -> None:
    docs = rendered["deploy/base"]
    expected = {"airlock-webhook": 8443, "airlock-controller": 8080}
    for name, port in expected.items():
        policy = one(docs, "NetworkPolicy", name)["spec"]
        deploy = one(docs, "Deployment", name)
        assert policy["podSelector"]["matchLabels"] == deploy["spec"]["selector"]["matchLabels"]
        ports = {p["port"] for rule in policy["ingress"] for p in rule["ports"]}
        assert ports == {port}
    webhook = one(docs, "NetworkPolicy", "airlock-webhook")["spec"]
    assert "Egress" in webhook["policyTypes"]
    # Only to the apiserver (its reviews of /metrics scrapers), which is reached on 443
    # or, after the Service's translation, on 6443.
    (egress,) = webhook["egress"]
    assert "to" not in egress
    assert {(p["protocol"], p["port"]) for p in egress["ports"]} == {("TCP", 443),
                                                                      ("TCP", 6443)}


# --- policies from Git ----------------------------------------------------------------

def test_policy_configmap_carries_every_policy_file(rendered: dict[str, Docs]) -> None:
    for path in ("deploy/base", *INSTALLS):
        configmap = one(rendered[path], "ConfigMap", "airlock-policies")
        files = {p.name: p.read_text() for p in policy_files(POLICIES)}
        assert configmap["data"] == files, "list every policy file in policies/kustomization.yaml"
        assert configmap["metadata"]["namespace"] == SYSTEM_NAMESPACE


def test_priority_classes_match_the_default_policy(rendered: dict[str, Docs]) -> None:
    policy = load_policy(POLICIES)
    want = {s.priority_class.name: (s.priority_class.value, s.priority_class.preemption_policy)
            for s in policy.classes.values()}
    want[PLACEHOLDER_PRIORITY_CLASS] = (PLACEHOLDER_PRIORITY, "Never")
    have = {d["metadata"]["name"]: (d["value"], d["preemptionPolicy"])
            for d in find(rendered["deploy/base"], "PriorityClass")}
    assert have == want
    assert have["airlock-scavenger"] == (1000, "Never")
    assert have["airlock-inference"][0] > have["airlock-training"][0] \
        > have["airlock-scavenger"][0] > have[PLACEHOLDER_PRIORITY_CLASS][0]
    assert not any(d.get("globalDefault") for d in find(rendered["deploy/base"],
                                                        "PriorityClass"))


# --- RBAC -----------------------------------------------------------------------------

def test_metrics_rbac_reviews_scrapers_and_lets_them_read(rendered: dict[str, Docs]) -> None:
    """What system:auth-delegator grants, to both accounts, and a reader role for the
    scraper that nothing in the install binds."""
    docs = rendered["deploy/base"]
    binding = one(docs, "ClusterRoleBinding", "airlock-metrics-auth")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": "airlock-metrics-auth"}
    assert sorted(s["name"] for s in binding["subjects"]) == ["airlock-controller",
                                                              "airlock-webhook"]
    assert {s["namespace"] for s in binding["subjects"]} == {SYSTEM_NAMESPACE}
    assert one(docs, "ClusterRole", "airlock-metrics-reader")["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert one(docs, "ClusterRole", "airlock-dashboard-viewer")["rules"] == [
        {"nonResourceURLs": ["/dashboard"], "verbs": ["get"]}]
    assert not [b for b in find(docs, "ClusterRoleBinding") + find(docs, "RoleBinding")
                if b["roleRef"]["name"] in ("airlock-metrics-reader", "airlock-dashboard-viewer")]


# Every grant of Airlock's accounts, against docs/security.md: tests/unit/test_rbac.py
# (deploy/) and tests/e2e/test_rbac.py (SubjectAccessReviews).


@pytest.mark.parametrize("name", ["controller-rbac.yaml", "webhook-rbac.yaml",
                                  "metrics-rbac.yaml"])
def test_rbac_files_stay_loadable_by_the_sandbox(name: str) -> None:
    """The sandbox creates each document of these files through the RBAC API."""
    docs = [d for d in yaml.safe_load_all((DEPLOY / "base" / name).read_text()) if d]
    assert {d["kind"] for d in docs} <= {"ClusterRole", "ClusterRoleBinding", "Role",
                                         "RoleBinding"}


# --- image ----------------------------------------------------------------------------

# The Dockerfile and the dependency lock need no cluster: tests/unit/test_supply_chain.py.

def test_dockerignore_keeps_secrets_and_junk_out() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".venv", "certs"} <= ignored


# --- observability --------------------------------------------------------------------

def _metric_names() -> set[str]:
    from webhook.admission.metrics import WebhookMetrics
    from webhook.controller.shells.metrics import ControllerMetrics

    names = set()
    for registry in (WebhookMetrics(lambda: 0.0, lambda: 1.0).registry,
                     ControllerMetrics().registry):
        for family in registry.collect():
            suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"],
                        "gauge": [""]}[family.type]
            names |= {family.name + s for s in suffixes}
    return names


@pytest.fixture(scope="module")
def apiserver_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[str]]:
    """The admission series of the kube-apiserver the tests run, with their labels, read
    from its source: k8s.io/apiserver at the version the harness builds, from the Go module
    cache that build filled. The series exist only once observed, so a scrape could not
    tell a misspelt name from an event that never happened."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go to fetch k8s.io/apiserver's source")
    staging = kubernetes_release().staging
    out = subprocess.run([go, "mod", "download", "-json", f"k8s.io/apiserver@{staging}"],
                         capture_output=True, text=True, check=False, timeout=600,
                         cwd=tmp_path_factory.mktemp("go"), env={**os.environ, "GOWORK": "off"})
    assert out.returncode == 0, out.stderr
    source = (Path(json.loads(out.stdout)["Dir"]) / "pkg/admission/metrics/metrics.go").read_text()
    consts = dict(re.findall(r'\b(namespace|subsystem)\s*=\s*"(\w+)"', source))
    suffixes = {"Counter": [""], "Gauge": [""], "Histogram": ["_bucket", "_sum", "_count"],
                "Summary": ["", "_sum", "_count"]}
    series: dict[str, set[str]] = {}
    for kind, opts, labels in re.findall(
            r"metrics\.New(\w+)Vec\(\s*&metrics\.\w+Opts\{(.*?)\},\s*\[\]string\{([^}]*)\}",
            source, re.S):
        parts = [consts[m] for m in re.findall(r"(?:Namespace|Subsystem):\s*(\w+)", opts)]
        parts += re.findall(r'Name:\s*"(\w+)"', opts)
        name = "_".join(parts)
        for suffix in suffixes[kind]:
            extra = {"_bucket": {"le"}, "": {"quantile"} if kind == "Summary" else set()
                     }.get(suffix, set())
            series[name + suffix] = set(re.findall(r'"(\w+)"', labels)) | extra
    assert "apiserver_admission_webhook_rejection_count" in series, "metrics.go has moved on"
    return series


# Prometheus's own: the one metric a rule may name that no component of the install exports.
PROMETHEUS_METRICS = {"up"}
_PROMQL_WORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and",
                 "or", "unless", "offset", "inf", "nan"}
_GROUPING = r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)"


def metrics_in(expr: str) -> set[str]:
    """The metric names a PromQL expression selects: what is left once strings, label
    matchers, ranges and groupings are taken out, less functions and keywords."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', "", expr)
    bare = re.sub(r"\{[^}]*\}|\[[^\]]*\]|" + _GROUPING, "", bare)
    return {m for m in re.findall(r"(?<![\w:.])([A-Za-z_:][\w:]*)\b(?!\s*\()", bare)
            } - _PROMQL_WORDS


def test_metrics_in_finds_what_a_rule_selects() -> None:
    assert metrics_in('histogram_quantile(0.99, sum by (le) (rate(a_bucket{x="b_c"}[5m])))'
                      ' > 0.5 and on (le) absent(up offset 1h) or b_total / 2e3') == {
        "a_bucket", "up", "b_total"}


def test_dashboard_and_alerts_use_metrics_that_exist(
        rendered: dict[str, Docs], apiserver_metrics: dict[str, set[str]]) -> None:
    docs = rendered["deploy/observability"]
    dashboard = json.loads(one(docs, "ConfigMap", "airlock-grafana-dashboard")["data"]
                           ["airlock-dashboard.json"])
    exprs = [t["expr"] for panel in dashboard["panels"] for t in panel.get("targets", [])]
    rules = one(docs, "PrometheusRule", "airlock")["spec"]["groups"]
    exprs += [r["expr"] for group in rules for r in group["rules"]]
    used = {m for expr in exprs for m in metrics_in(expr)}
    airlocks = _metric_names()
    unknown = used - airlocks - set(apiserver_metrics) - PROMETHEUS_METRICS
    assert not unknown, f"no component exports {sorted(unknown)}"
    # Every metric Airlock exports is on the dashboard or in an alert.
    base = {re.sub(r"_(bucket|sum|count)$", "", m) for m in used & airlocks}
    assert {re.sub(r"_(bucket|sum|count)$", "", m) for m in airlocks} <= base


def test_apiserver_alerts_select_airlocks_webhooks_by_labels_it_has(
        rendered: dict[str, Docs], apiserver_metrics: dict[str, set[str]]) -> None:
    names = {hook["name"] for _, hook in webhooks(rendered["deploy/base"])}
    groups = one(rendered["deploy/observability"], "PrometheusRule", "airlock")["spec"]["groups"]
    covered: set[str] = set()
    for rule in (r for group in groups for r in group["rules"]):
        expr = rule["expr"]
        selectors = re.findall(r"\b(apiserver_\w+)\{([^}]*)\}", expr)
        if not selectors:
            continue
        labels = set.union(*(apiserver_metrics[metric] for metric, _ in selectors))
        grouped = {g.strip() for group in re.findall(_GROUPING, expr) for g in group.split(",")}
        assert grouped <= labels, (rule["alert"], grouped - labels)
        for metric, matchers in selectors:
            matched = re.findall(r'(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"', matchers)
            assert {label for label, _, _ in matched} <= apiserver_metrics[metric], metric
            # Every selector is narrowed to Airlock's webhooks, by the names they really have.
            (pattern,) = [value for label, op, value in matched if (label, op) == ("name", "=~")]
            hooks = {n for n in names if re.fullmatch(pattern, n)}
            assert hooks, (rule["alert"], pattern, names)
            covered |= hooks
    assert covered == names


def test_service_monitors_select_services_and_ports_of_the_install(
        rendered: dict[str, Docs]) -> None:
    services = find(rendered["deploy/base"], "Service")
    for monitor in find(rendered["deploy/observability"], "ServiceMonitor"):
        selector = monitor["spec"]["selector"]["matchLabels"]
        matched = [s for s in services if selector.items() <= s["metadata"]["labels"].items()]
        assert matched, monitor["metadata"]["name"]
        # Both serve /metrics over HTTPS to a bearer token the apiserver allows.
        for endpoint in monitor["spec"]["endpoints"]:
            assert (endpoint["scheme"], endpoint["path"]) == ("https", "/metrics")
            assert endpoint["bearerTokenFile"] == \
                "/var/run/secrets/kubernetes.io/serviceaccount/token"
            assert endpoint["tlsConfig"]
        for endpoint in monitor["spec"]["endpoints"]:
            for service in matched:
                assert endpoint["port"] in {p["name"] for p in service["spec"]["ports"]}


# --- GitOps examples and docs ---------------------------------------------------------

def test_gitops_examples_point_at_the_cert_manager_overlay() -> None:
    argo = [d for d in yaml.safe_load_all((ROOT / "docs/gitops/argocd-application.yaml")
                                          .read_text()) if d]
    app = next(d for d in argo if d["kind"] == "Application")
    assert app["apiVersion"] == "argoproj.io/v1alpha1"
    assert app["spec"]["source"]["path"] == "deploy/overlays/cert-manager"
    flux = [d for d in yaml.safe_load_all((ROOT / "docs/gitops/flux-kustomization.yaml")
                                          .read_text()) if d]
    kustomization = next(d for d in flux if d["kind"] == "Kustomization")
    assert kustomization["apiVersion"] == "kustomize.toolkit.fluxcd.io/v1"
    assert kustomization["spec"]["path"] == "./deploy/overlays/cert-manager"
    source = next(d for d in flux if d["kind"] == "GitRepository")
    assert kustomization["spec"]["sourceRef"] == {"kind": "GitRepository",
                                                 "name": source["metadata"]["name"]}


def test_operations_doc_has_the_emergency_removal_command() -> None:
    # TYPE/NAME pairs: `kubectl delete TYPE NAME TYPE NAME` would read the second type
    # as another name of the first and leave the validating webhook in place.
    text = (ROOT / "docs" / "operations.md").read_text()
    assert EMERGENCY_REMOVAL in " ".join(text.split())
