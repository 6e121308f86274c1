"""The ValidatingAdmissionPolicies deploy/ installs say what the webhook says: the keys
users may write, the controller's records and identity, Airlock's gate, and which pods
the webhook is called for at all. The apiserver runs them (tests/e2e/test_security.py);
here they are read against the code they restate."""

from __future__ import annotations

import re
from typing import Any

import yaml

from tests.paths import ROOT
from webhook.accelerators import MATCH_CONDITIONS
from webhook.keys import CONTROLLER_IDENTITY, CONTROLLER_KEYS, GATE, USER_KEYS

POLICIES = ROOT / "deploy" / "base" / "admission-policies.yaml"
CONFIGURATIONS = ROOT / "deploy" / "base" / "webhook-configurations.yaml"


def _docs(path: Any) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _marks() -> dict[str, str]:
    """The airlock-marks policy's variables, by name, whitespace squeezed."""
    (policy,) = [d for d in _docs(POLICIES) if d["kind"] == "ValidatingAdmissionPolicy"
                 and d["metadata"]["name"] == "airlock-marks"]
    return {v["name"]: " ".join(v["expression"].split()) for v in policy["spec"]["variables"]}


def _quoted(expression: str) -> set[str]:
    return set(re.findall(r"'([^']*)'", expression))


def test_the_keys_users_write_and_the_records_are_the_codes() -> None:
    marks = _marks()
    assert _quoted(marks["userKeys"]) == USER_KEYS
    assert _quoted(marks["records"]) == CONTROLLER_KEYS
    assert _quoted(marks["byController"]) == {CONTROLLER_IDENTITY}
    assert _quoted(marks["gateRemoved"]) == {"UPDATE", GATE}


def test_the_pods_the_webhook_sees_are_those_its_configuration_sends() -> None:
    seen = _marks()["seenByWebhook"]
    prefilter = " ".join(MATCH_CONDITIONS["mutate.gpu-airlock.io"][0]["expression"].split())
    assert seen.endswith(f"&& ({prefilter})")
    (mutating,) = [d for d in _docs(CONFIGURATIONS)
                   if d["kind"] == "MutatingWebhookConfiguration"]
    selector = mutating["webhooks"][0]["namespaceSelector"]["matchExpressions"]
    by_key = {e["key"]: e for e in selector}
    assert by_key["kubernetes.io/metadata.name"]["operator"] == "NotIn"
    names = by_key["kubernetes.io/metadata.name"]["values"]
    assert seen.startswith(f"!(namespaceObject.metadata.name in {names}) && ".replace('"', "'"))
    assert by_key["gpu-airlock.io/ignore"] == {"key": "gpu-airlock.io/ignore",
                                               "operator": "NotIn", "values": ["true"]}
    assert "labels[?'gpu-airlock.io/ignore'].orValue('') != 'true'" in seen
