"""Where things are in the checkout, for every test level and helper: tests read the
repository's own files (policies/, deploy/, docs/), not copies."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
POLICIES = ROOT / "policies"
POLICY_EXAMPLES = POLICIES / "examples"
# What users write: the workloads and objects the docs apply.
WORKLOAD_EXAMPLES = ROOT / "examples" / "workloads"
# Broken policy directories, one per error, and the smallest valid policy they add to.
TESTDATA_POLICIES = ROOT / "tests" / "unit" / "testdata" / "policies"
BASE_POLICY = TESTDATA_POLICIES / "base" / "00-base.yaml"
DOCKERFILE = ROOT / "Dockerfile"
