"""The sandbox's operator registry and the pure parts of running them: which names
`--operators` accepts, the webhook configurations made from an operator's own manifests,
and the Secret the training-operator's certificate rotator must accept as it is."""

from __future__ import annotations

import argparse
import base64
import datetime
from pathlib import Path

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import load_pem_private_key

from webhook.sandbox.manifests import crds, store_manifests, webhook_configurations
from webhook.sandbox.operators import (
    CERT_MANAGER,
    JOBSET,
    OPERATORS,
    PYTORCH_ONLY,
    TRAINING_OPERATOR,
    UnknownOperator,
    select,
)
from webhook.sandbox.options import add_sandbox_arguments
from webhook.sandbox.rotators import rotator_secret


def test_all_names_every_operator_once() -> None:
    assert [op.name for op in select("all")] == list(OPERATORS)
    assert [op.name for op in select("lws, jobset,lws")] == ["lws", "jobset"]


def test_unknown_names_are_refused_with_the_known_ones() -> None:
    with pytest.raises(UnknownOperator) as e:
        select("jobset,kueue,volcano")
    assert "unknown operators kueue, volcano" in str(e.value)
    for name in OPERATORS:
        assert name in str(e.value)


def _source(files: dict[str, str], root: Path) -> Path:
    """A module's source tree holding `files`."""
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


HOOKS = """\
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutating-webhook-configuration}
webhooks:
- name: mjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate-jobset}}
- name: mpod.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validating-webhook-configuration}
webhooks:
- name: vjobset.kb.io
  clientConfig: {service: {name: webhook-service, namespace: system, path: /validate-jobset}}
"""

POD_PATCH = """\
- op: replace
  path: /webhooks/1
  value:
    name: mpod.kb.io
    clientConfig: {service: {name: webhook-service, namespace: system, path: /mutate--v1-pod}}
    objectSelector:
      matchExpressions: [{key: jobset.sigs.k8s.io/jobset-name, operator: Exists}]
"""


def test_webhooks_are_the_operators_own_patched_and_pointed_at_loopback(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    files = {JOBSET.webhooks[0]: HOOKS, JOBSET.webhook_patches[0][0]: POD_PATCH,
             JOBSET.webhook_patches[1][0]: "[]", JOBSET.crds[0]: "kind: CustomResourceDefinition"}
    store_manifests(JOBSET, _source(files, tmp_path / "module"))
    docs = webhook_configurations(JOBSET, "https://127.0.0.1:9443", b"PEM")
    assert [d["metadata"]["name"] for d in docs] == [
        "jobset-mutating-webhook-configuration", "jobset-validating-webhook-configuration"]
    pod_hook = docs[0]["webhooks"][1]
    assert pod_hook["objectSelector"]["matchExpressions"][0]["key"] == \
        "jobset.sigs.k8s.io/jobset-name"
    assert pod_hook["clientConfig"] == {"url": "https://127.0.0.1:9443/mutate--v1-pod",
                                        "caBundle": base64.b64encode(b"PEM").decode()}
    assert docs[1]["webhooks"][0]["clientConfig"]["url"] == \
        "https://127.0.0.1:9443/validate-jobset"


def _validator(plural: str) -> dict[str, object]:
    return {"name": f"validator.{plural}", "rules": [{"resources": [plural]}],
            "clientConfig": {"service": {"name": "s", "path": f"/validate-{plural}"}}}


def test_the_demos_training_operator_installs_and_serves_pytorchjobs_only(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    plurals = {rel: rel.rsplit("_", 1)[1].removesuffix(".yaml") for rel in TRAINING_OPERATOR.crds}
    files = {rel: yaml.safe_dump({"kind": "CustomResourceDefinition",
                                  "metadata": {"name": plural},
                                  "spec": {"names": {"plural": plural}}})
             for rel, plural in plurals.items()}
    files[TRAINING_OPERATOR.webhooks[0]] = yaml.safe_dump({
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "v"},
        "webhooks": [_validator(plural) for plural in plurals.values()]})
    files[TRAINING_OPERATOR.webhook_patches[0][0]] = "[]"
    store_manifests(TRAINING_OPERATOR, _source(files, tmp_path / "module"))
    assert [d["metadata"]["name"] for d in crds(PYTORCH_ONLY)] == ["pytorchjobs"]
    assert len(crds(TRAINING_OPERATOR)) == 6
    (only,) = webhook_configurations(PYTORCH_ONLY, "https://127.0.0.1:9443", b"PEM")
    assert [h["clientConfig"]["url"] for h in only["webhooks"]] == \
        ["https://127.0.0.1:9443/validate-pytorchjobs"]
    (whole,) = webhook_configurations(TRAINING_OPERATOR, "https://127.0.0.1:9443", b"PEM")
    assert len(whole["webhooks"]) == 6
    # The same binary, its controllers and webhooks for PyTorchJobs only.
    assert PYTORCH_ONLY.tool == TRAINING_OPERATOR.tool
    assert PYTORCH_ONLY.commands[0].args[-2:] == ("--enable-scheme", "pytorchjob")


def test_helm_template_labels_are_dropped_from_cert_managers_crds(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("AIRLOCK_CACHE_DIR", str(tmp_path / "cache"))
    files = {rel: yaml.safe_dump({
        "kind": "CustomResourceDefinition",
        "metadata": {"name": Path(rel).stem, "labels": {"app": '{{ template "x" . }}'}}})
        for rel in CERT_MANAGER.crds}
    store_manifests(CERT_MANAGER, _source(files, tmp_path / "module"))
    assert all("labels" not in d["metadata"] for d in crds(CERT_MANAGER))


def test_rotator_secret_passes_cert_controllers_own_checks() -> None:
    """What cert-controller v0.10.1 verifies before it leaves a Secret alone: the CA
    verifies itself for the DNS name `training-operator-ca`, its key is RSA in PKCS#1,
    and the serving certificate verifies under it for the Service name, 90 days ahead;
    the apiserver, calling the loopback URL, needs 127.0.0.1 too."""
    assert TRAINING_OPERATOR.rotator_namespace == "kubeflow"
    data, ca_pem = rotator_secret("kubeflow")
    assert data["ca.crt"] == ca_pem
    assert data["ca.key"].startswith(b"-----BEGIN RSA PRIVATE KEY-----")
    assert isinstance(load_pem_private_key(data["ca.key"], None), rsa.RSAPrivateKey)
    ca = x509.load_pem_x509_certificate(ca_pem)
    cert = x509.load_pem_x509_certificate(data["tls.crt"])
    ahead = datetime.datetime.now(datetime.UTC) + datetime.timedelta(days=91)
    ca.verify_directly_issued_by(ca)
    cert.verify_directly_issued_by(ca)
    for c in (ca, cert):
        assert c.not_valid_before_utc < datetime.datetime.now(datetime.UTC) < ahead < \
            c.not_valid_after_utc
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert sans(ca) == {"training-operator-ca"}
    assert sans(cert) == {"training-operator.kubeflow.svc", "127.0.0.1"}


def sans(cert: x509.Certificate) -> set[str]:
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(n.value) for n in names}


def test_the_command_line_refuses_an_unknown_operator_before_starting_anything(
        capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="airlock sandbox")
    add_sandbox_arguments(parser)
    assert [op.name for op in parser.parse_args(["up", "--operators", "all"]).operators] == \
        list(OPERATORS)
    assert parser.parse_args(["up"]).operators == []
    with pytest.raises(SystemExit):
        parser.parse_args(["up", "--operators", "jobset,kueue"])
    error = capsys.readouterr().err
    assert "argument --operators: unknown operator kueue; known: jobset, lws, " \
           "training-operator, kuberay, cert-manager (or all)" in error
