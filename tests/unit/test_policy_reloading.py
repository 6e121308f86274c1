"""Hot reload: a changed directory is parsed again, a bad edit keeps the last good
policy, and the kubelet's `..data` swap of a mounted ConfigMap is followed."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.paths import BASE_POLICY
from tests.servers import KubeletDir
from webhook.policy import reloading
from webhook.policy.reloading import Outcome, PolicyStore

BASE = BASE_POLICY.read_text()
GOOD = {"00-base.yaml": BASE.encode()}
BROKEN = {"00-base.yaml": BASE.replace("mode: preferred", "mode: always").encode()}
FIXED = {"00-base.yaml": BASE.replace("name: kubeflow", "name: kubeflow-jobs").encode()}


@pytest.fixture
def mounted(tmp_path: Path) -> KubeletDir:
    directory = KubeletDir(tmp_path / "policies")
    directory.publish(GOOD)
    return directory


def test_unchanged_files_are_not_parsed_again(mounted: KubeletDir,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    store = PolicyStore(mounted.path)
    assert store.reload_if_changed() == "reloaded"
    monkeypatch.setattr(reloading, "load_policy", lambda _: pytest.fail("parsed again"))
    assert store.reload_if_changed() == "unchanged"


def test_a_broken_swap_keeps_the_last_good_policy_until_fixed(mounted: KubeletDir) -> None:
    store = PolicyStore(mounted.path)
    assert (store.reload_if_changed(), store.last_error) == ("reloaded", None)
    good = store.policy
    mounted.publish(BROKEN)
    assert store.reload_if_changed() == "failed"
    assert store.policy is good
    assert store.last_error
    assert store.last_error.startswith(
        f"{mounted.path}/00-base.yaml:12: spec.classes.training.topology.mode")
    assert store.failed_at is not None
    # Reported once, not on every poll.
    assert store.reload_if_changed() == "unchanged"
    mounted.publish(FIXED)
    assert store.reload_if_changed() == "reloaded"
    assert store.last_error is None
    assert store.failed_at is None
    assert store.policy is not None
    assert [r.name for r in store.policy.rules] == ["kubeflow-jobs"]


def test_a_first_bad_policy_leaves_none_loaded(tmp_path: Path) -> None:
    directory = KubeletDir(tmp_path / "policies")
    directory.publish(BROKEN)
    store = PolicyStore(directory.path)
    assert store.reload_if_changed() == "failed"
    assert store.policy is None
    assert store.last_error


def test_a_vanished_directory_keeps_the_last_good_policy(tmp_path: Path) -> None:
    directory = tmp_path / "policies"
    directory.mkdir()
    (directory / "00-base.yaml").write_text(BASE)
    store = PolicyStore(directory)
    assert store.reload_if_changed() == "reloaded"
    (directory / "00-base.yaml").rename(tmp_path / "elsewhere.yaml")
    directory.rmdir()
    assert store.reload_if_changed() == "failed"
    assert store.policy is not None
    assert "cannot list" in (store.last_error or "")


async def test_watch_reports_each_change(mounted: KubeletDir) -> None:
    store = PolicyStore(mounted.path)
    seen: list[Outcome] = []
    task = asyncio.create_task(store.watch(0.01, seen.append))
    try:
        await until(lambda: seen == ["reloaded"])
        mounted.publish(BROKEN)
        await until(lambda: seen == ["reloaded", "failed"])
        mounted.publish(FIXED)
        await until(lambda: seen == ["reloaded", "failed", "reloaded"])
    finally:
        task.cancel()


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("timed out")
