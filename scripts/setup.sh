#!/usr/bin/env bash
# Make .venv with Airlock and its development tools. Safe to run again.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Airlock needs Python 3.11 or newer as \$PYTHON (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --upgrade pip
# The runtime dependencies at the versions the image ships (deploy/image/requirements.lock,
# without its hashes: pip cannot hash an editable install), so the tests run what ships.
sed -e '/--hash=/d' -e 's/ \\$//' deploy/image/requirements.lock > .venv/image-versions.txt
.venv/bin/python -m pip install --quiet -e '.[dev]' -c .venv/image-versions.txt
