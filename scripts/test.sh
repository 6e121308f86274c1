#!/usr/bin/env bash
# Set up and run every check CI runs: lint, types, import layers, policy lint, unit,
# server (real TLS) and end-to-end tests against a real control plane (built from the
# official Go modules on first use and cached under ~/.cache/airlock), and the dashboard's
# browser test in Debian's chromium (installed with apt-get when missing: run as root).
#
#   ./scripts/test.sh            everything, as CI runs it (extra arguments go to pytest)
#   ./scripts/test.sh --fast     the inner loop: lint, types, layers and unit tests only,
#                                with no build and no cluster (seconds, once .venv exists)
#   AIRLOCK_KUBERNETES=1.37 ./scripts/test.sh tests/e2e
#                                the end-to-end tests on another Kubernetes release
#                                (1.34, the default, to 1.37; built on first use)
set -euo pipefail
cd "$(dirname "$0")/.."
fast=false
if [ "${1:-}" = "--fast" ]; then
  fast=true
  shift
fi
if [ "$fast" = false ] || [ ! -x .venv/bin/airlock ]; then
  ./scripts/setup.sh
fi
echo "== ruff";  .venv/bin/ruff check .
echo "== mypy";  .venv/bin/mypy
echo "== import layers"; .venv/bin/lint-imports --no-cache
echo "== policy lint"; .venv/bin/airlock lint policies
if [ "$fast" = true ]; then
  echo "== unit tests"; exec .venv/bin/pytest -q -ra tests/unit "$@"
fi
echo "== chromium and chromedriver (the dashboard's browser test)"
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
    echo "the dashboard's browser test needs Debian's chromium and chromium-driver:" \
         "run as root on Debian, or apt-get install -y chromium chromium-driver first" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver || {
    apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; } || {
    echo "could not install chromium and chromium-driver with apt-get" >&2; exit 1; }
  if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
    echo "apt-get installed chromium and chromium-driver, but /usr/bin/chromium or" \
         "/usr/bin/chromedriver is still missing" >&2
    exit 1
  fi
fi
echo "== Kubernetes binaries, KWOK, the operators, Karpenter, Helm and the benches' peers"
.venv/bin/python -m webhook.sandbox.building --operators all --autoscaler karpenter --helm
# Kubernetes' own gangs (PodGroups) are tested on 1.37 whatever release the suite runs.
.venv/bin/python -m webhook.sandbox.building --kubernetes 1.37
.venv/bin/python -m bench.peers --build kueue,coscheduling
echo "== tests"; .venv/bin/pytest -q -ra "$@"
