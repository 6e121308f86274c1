"""Fixtures shared by every test level."""

from __future__ import annotations

import os

import pytest

from tests.builders import make_policy
from webhook.policy.model import Policy
from webhook.sandbox.binaries import Binaries, ensure_binaries
from webhook.sandbox.gobuilding import BuildError


@pytest.fixture
def policy() -> Policy:
    return make_policy()


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The control plane's binaries and KWOK (built once, then cached). Under
    CI=true their absence fails the run instead of skipping."""
    try:
        return ensure_binaries(lambda line: print(line, flush=True))
    except BuildError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"Kubernetes binaries missing: {e}")
        pytest.skip(f"no Kubernetes binaries: {e}")
