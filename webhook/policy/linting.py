"""`airlock lint`: check policy files as the webhook would load them."""

from __future__ import annotations

import sys
from pathlib import Path

from webhook.policy.loading import load_policy
from webhook.policy.schema import schema_text
from webhook.policy.sources import PolicyError


def run_lint(directory: Path, schema_out: Path | None = None) -> int:
    if schema_out is not None:
        schema_out.write_text(schema_text())
    try:
        policy = load_policy(directory)
    except PolicyError as e:
        for problem in e.problems:
            print(problem)
        print(f"{len(e.problems)} problem(s) in {directory}", file=sys.stderr)
        return 1
    print(f"{directory}: ok — {len(policy.sources)} file(s), {len(policy.classes)} classes, "
          f"{len(policy.rules)} rules, topology levels: "
          f"{', '.join(policy.topology_levels) or 'none'}"
          + (f", GPU slices: {', '.join(s.resource for s in policy.slices)}"
             if policy.slices else ""))
    return 0
