# syntax=docker/dockerfile:1
# Airlock: the webhook and the controller in one image; the command picks the role
# (deploy/base passes `serve ...` or `controller ...`).
#   docker build -t ghcr.io/gpu-airlock/airlock:0.1.0 .
# The base is pinned by digest, so a build takes exactly the image that was reviewed, not
# whatever the tag points at today. The default is the multi-platform index (linux/amd64 and
# linux/arm64 among others) of python:3.11-slim-bookworm as docker-library/repo-info
# recorded it: Python 3.11.16 on Debian bookworm, built 2026-08-25. Refresh it to take the
# base's security fixes, and review the change like any other:
#   docker buildx imagetools inspect python:3.11-slim-bookworm    # the "Digest:" line
# or give another at build time: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:0bee7276f83efd4a1ee05bbbf4281d95ed28e079220a9457f25a93e3f1e3c31b

# --- build: a wheel of Airlock, and a virtualenv of exactly the pinned dependencies ---
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
WORKDIR /src
# The build backend, exactly as locked, in a virtualenv of its own that never leaves this
# stage: the setuptools the base image ships (65.5 with Python 3.11) predates the license
# expression of pyproject.toml, and an isolated build would fetch one unpinned.
COPY deploy/image/build.lock /tmp/build.lock
RUN python -m venv /opt/build \
 && /opt/build/bin/pip install --require-hashes --no-deps -r /tmp/build.lock
RUN python -m venv /opt/airlock
# Dependencies first (their layer survives source edits), exactly as locked: --no-deps,
# so nothing unpinned comes in transitively, and --require-hashes, so every file must be
# one whose sha256 the lock holds (scripts/lock_image.py makes it from the index).
COPY deploy/image/requirements.lock /tmp/requirements.lock
RUN /opt/airlock/bin/pip install --require-hashes --no-deps -r /tmp/requirements.lock
COPY pyproject.toml README.md ./
COPY webhook ./webhook
# webhook/policy/defaults links here: the wheel ships the default policy from it.
COPY policies ./policies
# --no-build-isolation: the build backend is the locked one above, not one fetched
# unpinned from the index for the build.
RUN /opt/build/bin/python -m pip wheel --no-build-isolation --no-deps --wheel-dir /wheels . \
 && /opt/airlock/bin/pip install --no-deps /wheels/*.whl \
 && /opt/airlock/bin/pip check

# --- runtime: slim, no build tools, non-root ---
FROM ${PYTHON_IMAGE} AS runtime
LABEL org.opencontainers.image.title="airlock" \
      org.opencontainers.image.description="GPU admission webhook and gang controller" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://github.com/gpu-airlock/airlock"
COPY --from=build /opt/airlock /opt/airlock
ENV PATH=/opt/airlock/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
# The certificate and the policies come from mounts (deploy/base); nothing is written
# at run time but under /tmp, so the root filesystem can be read-only.
WORKDIR /tmp
USER 65532:65532
EXPOSE 8443 8080
ENTRYPOINT ["airlock"]
CMD ["serve", "--port", "8443", "--cert-dir", "/etc/airlock/certs", "--policies", "/etc/airlock/policies"]
