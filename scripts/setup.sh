#!/usr/bin/env bash
# Make .venv with Airlock and its development tools. Safe to run again: when nothing the
# install depends on has changed since the last one, it asks pip nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
  echo "Airlock needs Python 3.11 or newer as \$PYTHON (found: $("$PYTHON" --version 2>&1))" >&2
  exit 1
fi
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
# The stamp is what the install below depends on: the interpreter, the files that name the
# packages and their versions, and this script. pip would take seconds to find that
# everything is already there; a matching stamp says so at once (remove .venv/setup-stamp
# to have pip look again, e.g. after installing or removing packages in .venv by hand).
stamp=$(.venv/bin/python - pyproject.toml deploy/image/*.lock scripts/setup.sh <<'PY'
import hashlib
import sys

digest = hashlib.sha256(sys.version.encode())
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        digest.update(f.read())
print(digest.hexdigest())
PY
)
if [ "$(cat .venv/setup-stamp 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# The runtime dependencies at the versions the image ships (deploy/image/requirements.lock),
# so the tests run what ships, and the setuptools its build stage makes the wheel with
# (deploy/image/build.lock), so the tests build the wheel as the image does. Without their
# hashes: pip cannot hash an editable install.
unhashed() { sed -e '/--hash=/d' -e 's/ \\$//' "$1"; }
unhashed deploy/image/requirements.lock > .venv/image-versions.txt
unhashed deploy/image/build.lock > .venv/build-versions.txt
.venv/bin/python -m pip install --quiet -e '.[dev]' -r .venv/build-versions.txt \
  -c .venv/image-versions.txt
# Written last: an install that failed half-way leaves no stamp that matches.
echo "$stamp" > .venv/setup-stamp
