"""Queues, fair share and preemption in policy: defaults, durations, once-only settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import BASE_POLICY
from webhook.policy.loading import PolicyError, load_policy
from webhook.policy.queues import seconds


@pytest.mark.parametrize(("text", "value"), [
    ("0", 0.0), ("30s", 30.0), ("5m", 300.0), ("24h", 86400.0), ("1h30m", 5400.0),
    ("1.5h", 5400.0), ("250ms", 0.25)])
def test_durations(text: str, value: float) -> None:
    assert seconds(text) == value


def _policy(tmp_path: Path, spec: str, name: str = "10-more.yaml") -> Path:
    (tmp_path / "00-base.yaml").write_bytes(BASE_POLICY.read_bytes())
    (tmp_path / name).write_text("apiVersion: gpu-airlock.io/v1alpha1\nkind: AirlockPolicy\n"
                                 f"metadata: {{name: {name[:-5]}}}\nspec:\n{spec}")
    return tmp_path


def test_defaults_without_any_queue(tmp_path: Path) -> None:
    policy = load_policy(_policy(tmp_path, "  queues: []\n"))
    assert policy.queues == ()
    assert (policy.fair_share.half_life, policy.fair_share.entry_charge) == ("24h", "10m")
    assert (policy.preemption.enabled, policy.preemption.min_runtime,
            policy.preemption.delay, policy.preemption.requeue_backoff,
            policy.preemption.stale_gang_grace_period) == (True, "5m", "30s", "2m", "10m")
    # Single pods queue for training and scavenger, not inference, unless a class says.
    assert [policy.queued(c) for c in ("training", "inference", "scavenger")] == \
        [True, False, True]


def test_a_bad_duration_names_its_line(tmp_path: Path) -> None:
    with pytest.raises(PolicyError) as caught:
        load_policy(_policy(tmp_path, "  fairShare:\n    halfLife: one day\n"))
    (problem,) = caught.value.problems
    assert problem.line == 6
    assert problem.message.startswith("spec.fairShare.halfLife: String should match pattern")


def test_settings_are_defined_once(tmp_path: Path) -> None:
    _policy(tmp_path, "  preemption: {minRuntime: 1m}\n")
    _policy(tmp_path, "  preemption: {minRuntime: 2m}\n", name="20-again.yaml")
    with pytest.raises(PolicyError) as caught:
        load_policy(tmp_path)
    (problem,) = caught.value.problems
    assert "setting 'preemption' is already defined at" in problem.message
