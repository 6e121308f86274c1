"""`airlock lint`: check policy files as the webhook would load them, and optionally the
webhook configurations as deployed: their pre-filter decides which pods the webhook sees
at all, so one that is not Airlock's may keep a policy accelerator's pods from it."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from webhook.accelerators import MATCH_CONDITIONS
from webhook.policy.loading import load_policy
from webhook.policy.model import Policy
from webhook.policy.schema import schema_text
from webhook.policy.sources import Document, Loc, PolicyError, Problem, read_documents


def _webhooks(doc: Document) -> Iterator[tuple[dict[str, Any], Loc]]:
    """Each webhook of a configuration, or of the configurations in a `kubectl get -o
    yaml` List, with where it is."""
    data = doc.data if isinstance(doc.data, dict) else {}
    items: list[tuple[Any, Loc]] = [(data, ())]
    if data.get("kind") == "List":
        items = [(item, ("items", i)) for i, item in enumerate(data.get("items") or [])]
    for item, loc in items:
        if not isinstance(item, dict) or not str(item.get("kind", "")).endswith(
                "WebhookConfiguration"):
            continue
        for i, hook in enumerate(item.get("webhooks") or []):
            if isinstance(hook, dict):
                yield hook, (*loc, "webhooks", i)


def _squeezed(conditions: Any) -> list[dict[str, str]]:
    if not isinstance(conditions, list):
        return []
    return [{k: " ".join(str(v).split()) for k, v in c.items()} for c in conditions
            if isinstance(c, dict)]


def prefilter_problems(configurations: Path, policy: Policy) -> list[Problem]:
    """Where the deployed webhooks' matchConditions differ from the pre-filter this
    version of Airlock passes every policy accelerator with."""
    problems: list[Problem] = []
    seen: set[str] = set()
    names = ", ".join(policy.accelerators)
    for doc in read_documents(configurations):
        for hook, loc in _webhooks(doc):
            name = hook.get("name")
            if name not in MATCH_CONDITIONS:
                continue
            seen.add(name)
            if _squeezed(hook.get("matchConditions")) != _squeezed(MATCH_CONDITIONS[name]):
                problems.append(Problem(
                    doc.file, doc.line((*loc, "matchConditions")),
                    f"webhook {name}: its matchConditions are not Airlock's pre-filter "
                    f"(webhook/accelerators.py, deploy/base/webhook-configurations.yaml), "
                    f"so pods requesting the policy's accelerators ({names}) may never "
                    f"reach it; apply deploy/ again"))
    for name in sorted(MATCH_CONDITIONS.keys() - seen):
        problems.append(Problem(str(configurations), None,
                                f"webhook {name} is not configured in this file"))
    return problems


def run_lint(directory: Path, schema_out: Path | None = None,
             webhook_configurations: Path | None = None) -> int:
    if schema_out is not None:
        schema_out.write_text(schema_text())
    try:
        policy = load_policy(directory)
        problems = [] if webhook_configurations is None else \
            prefilter_problems(webhook_configurations, policy)
    except PolicyError as e:
        problems = e.problems
    if problems:
        for problem in problems:
            print(problem)
        print(f"{len(problems)} problem(s) in {directory}"
              f"{f' and {webhook_configurations}' if webhook_configurations else ''}",
              file=sys.stderr)
        return 1
    print(f"{directory}: ok — {len(policy.sources)} file(s), {len(policy.classes)} classes, "
          f"{len(policy.rules)} rules, topology levels: "
          f"{', '.join(policy.topology_levels) or 'none'}, accelerators: "
          f"{', '.join(policy.accelerators)}, DRA device classes: "
          f"{', '.join(d.name for d in policy.device_classes) or 'none'}, default class: "
          f"{policy.default_class or 'none'}")
    if webhook_configurations is not None:
        print(f"{webhook_configurations}: ok — Airlock's pre-filter, which passes every "
              f"accelerator above")
    return 0
