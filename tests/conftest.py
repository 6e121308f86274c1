"""Fixtures shared by every test level."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pytest

from tests.builders import make_policy
from tests.kube import prerequisite_missing, progress
from webhook.policy.model import Policy
from webhook.sandbox.binaries import RELEASES, Binaries, ensure_binaries, ensure_helm
from webhook.sandbox.gobuilding import BuildError

T = TypeVar("T")


@pytest.fixture
def policy() -> Policy:
    return make_policy()


def _built(what: str, build: Callable[[], T]) -> T:
    """Built once, then cached; under CI=true their absence fails the run instead of
    skipping."""
    try:
        return build()
    except BuildError as e:
        prerequisite_missing(f"{what} missing: {e}")


@pytest.fixture(scope="session")
def binaries() -> Binaries:
    """The control plane's binaries and KWOK."""
    return _built("Kubernetes binaries", lambda: ensure_binaries(progress))


@pytest.fixture(scope="session")
def newest_binaries() -> Binaries:
    """Kubernetes 1.37's binaries whatever release the suite runs, for what only it has
    (PodGroups); built from the modules even with $KUBEBUILDER_ASSETS set."""
    return _built("Kubernetes 1.37 binaries",
                  lambda: ensure_binaries(progress, RELEASES["1.37"], assets_too=False))


@pytest.fixture(scope="session")
def helm() -> Path:
    """Helm, for the chart's tests."""
    return _built("helm", lambda: ensure_helm(progress))
