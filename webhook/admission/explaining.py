"""`airlock explain`: what admission would do to each Pod in some files, offline.

It runs the very engine the server runs (mutate, apply the patch, validate the result, as
the apiserver would), so what it prints is what a cluster gets.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonpatch
import orjson
import yaml

from webhook.admission import engine
from webhook.admission.reviews import Request
from webhook.keys import IGNORE_NAMESPACE_LABEL
from webhook.pods import PodShapeError, PodView
from webhook.policy.classifying import classify
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.model import Policy


def _documents(path: Path) -> Iterator[Any]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text()
    for doc in yaml.safe_load_all(text):  # JSON is YAML too
        if isinstance(doc, dict) and doc.get("kind") == "List":
            yield from doc.get("items") or []
        elif doc is not None:
            yield doc


def _priority_value(policy: Policy, name: str | None) -> int | None:
    for spec in policy.classes.values():
        if spec.priority_class.name == name:
            return spec.priority_class.value
    return None


def explain_pod(obj: Mapping[str, Any], policy: Policy,
                namespace_labels: Mapping[str, str]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or "default"
    pod = PodView.parse(obj, namespace)
    decision = classify(pod, policy, namespace_labels)
    result: dict[str, Any] = {
        "name": pod.name, "namespace": namespace,
        "class": decision.class_, "rule": decision.rule,
        "gang": None if decision.gang is None else {
            "name": decision.gang.name, "size": decision.gang.size,
            "source": decision.gang.source},
    }
    if namespace_labels.get(IGNORE_NAMESPACE_LABEL) == "true":
        # The webhook's namespaceSelector keeps such pods from reaching Airlock at all.
        patch: list[Any] = []
        mutated: dict[str, Any] = dict(obj)
        allowed, reason, warnings = True, decision.reason, []
    else:
        request = Request(uid="explain", operation="CREATE", namespace=namespace,
                          username="airlock-explain", object=obj, old_object=None)
        mutation = engine.handle(engine.MUTATE, request, policy)
        patch = list(mutation.patch)
        mutated = jsonpatch.apply_patch(obj, patch) if patch else dict(obj)
        verdict = engine.handle(
            engine.VALIDATE,
            Request(uid="explain", operation="CREATE", namespace=namespace,
                    username="airlock-explain", object=mutated, old_object=None), policy)
        allowed = mutation.allowed and verdict.allowed
        reason = verdict.message or mutation.message or decision.reason
        warnings = list(mutation.warnings) + list(verdict.warnings)
    pc_name = (mutated.get("spec") or {}).get("priorityClassName")
    result.update({
        "priorityClassName": pc_name,
        "priority": _priority_value(policy, pc_name),
        "allowed": allowed, "reason": reason, "warnings": warnings,
        "patch": patch, "mutated": mutated,
    })
    return result


def _text(r: Mapping[str, Any]) -> str:
    gang = r["gang"]
    gang_text = "-" if gang is None else f"{gang['name']} (size {gang['size'] or '?'}, " \
        f"{gang['source']})"
    lines = [
        f"{r['namespace']}/{r['name']}: {'allowed' if r['allowed'] else 'DENIED'}",
        f"  class:    {r['class'] or '-'} (rule {r['rule'] or '-'}; {r['reason']})",
        f"  gang:     {gang_text}",
        f"  priority: {r['priorityClassName'] or '-'} ({r['priority']})",
        f"  patch:    {len(r['patch'])} operation(s)",
    ]
    lines += [f"  warning:  {w}" for w in r["warnings"]]
    return "\n".join(lines)


def run_explain(files: list[Path], policies: Path, output: str) -> int:
    try:
        policy = load_policy(policies)
    except PolicyError as e:
        print(f"policy in {policies} is invalid:\n{e}", file=sys.stderr)
        return 1
    docs: list[Any] = []
    try:
        for f in files:
            docs.extend(_documents(f))
    except (OSError, yaml.YAMLError) as e:
        print(f"cannot read pods: {e}", file=sys.stderr)
        return 1
    namespaces = {
        (d.get("metadata") or {}).get("name"): (d.get("metadata") or {}).get("labels") or {}
        for d in docs if isinstance(d, dict) and d.get("kind") == "Namespace"
    }
    code = 0
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") != "Pod":
            continue
        ns = (doc.get("metadata") or {}).get("namespace") or "default"
        try:
            result = explain_pod(doc, policy, namespaces.get(ns, {}))
        except PodShapeError as e:
            print(f"{(doc.get('metadata') or {}).get('name')}: not a valid Pod: {e}",
                  file=sys.stderr)
            code = 1
            continue
        print(orjson.dumps(result).decode() if output == "json" else _text(result))
    return code
