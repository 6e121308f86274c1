#!/usr/bin/env bash
# Set up and run every check CI runs: lint, types, policy lint, unit, server and
# end-to-end tests against a real kube-apiserver, etcd and kube-scheduler (built from
# the official Go modules on first use and cached under ~/.cache/airlock).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "== ruff";  .venv/bin/ruff check .
echo "== mypy";  .venv/bin/mypy
echo "== import layers"; .venv/bin/lint-imports --no-cache
echo "== policy lint"; .venv/bin/airlock lint policies
echo "== Kubernetes binaries"; .venv/bin/python -m webhook.sandbox.binaries
echo "== tests"; .venv/bin/pytest -q -ra "$@"
