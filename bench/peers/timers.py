"""Airlock's own timers at the replay's speed (pure but for the copy it writes): a policy
directory like the one given, with every duration of its preemption and fair-share
settings, and each class's own preemption delay, divided by the speed, so that at 100x a
gang preempts after 0.3 real seconds as it would after 30 at 1x, and past usage fades 100
times faster. `capacity` keeps its
durations: they wait for an autoscaler, whose real latency the speed does not shrink
(and the replay runs none), as the controller's --reservation-timeout waits for the
scheduler. The controller's `--forecast-resolution` is divided too (`controller_flags`):
at 15 real seconds, a forecast at 100x would take ends 25 trace-minutes apart as one.

A setting may be defined once across the policy files, so the copy drops the settings
from the files that define them and writes them, scaled, into a file of its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import yaml

from webhook.controller.core.round import DEFAULTS
from webhook.policy.loading import policy_files
from webhook.policy.model import Policy
from webhook.policy.queues import seconds

# Each timed setting (as a policy file names it) -> the Policy's field, and its durations.
TIMERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "preemption": ("preemption", ("minRuntime", "delay", "requeueBackoff",
                                  "staleGangGracePeriod", "checkpointGrace")),
    "fairShare": ("fair_share", ("halfLife", "entryCharge")),
}
TIMERS_FILE = "99-timers-at-speed.yaml"


def duration(value: float) -> str:
    """Seconds as a Go-style duration, to the millisecond, never in exponent form."""
    return f"{value:.3f}".rstrip("0").rstrip(".") + "s"


def at_speed(timer: str, speed: float) -> str:
    """The policy duration `timer` divided by `speed`."""
    return duration(seconds(timer) / speed)


def settings_at_speed(policy: Policy, speed: float) -> dict[str, dict[str, Any]]:
    """The timed settings of the merged policy, whole (a setting is replaced, not merged),
    their durations divided by `speed`."""
    out = {}
    for name, (field, timers) in TIMERS.items():
        spec = getattr(policy, field).model_dump(by_alias=True, mode="json")
        spec.update({t: at_speed(spec[t], speed) for t in timers})
        out[name] = spec
    return out


def airlock_timers(policy: Policy, speed: float) -> dict[str, str]:
    """Only the durations, by their path in the policy (and the controller's flags): what
    the report records."""
    timers = {f"{name}.{t}": spec[t]
              for name, spec in settings_at_speed(policy, speed).items()
              for t in TIMERS[name][1]}
    timers.update({f"classes.{name}.preemptionDelay": at_speed(c.preemption_delay, speed)
                   for name, c in policy.classes.items() if c.preemption_delay is not None})
    timers["controller.forecastResolution"] = duration(_resolution(speed))
    return timers


def controller_flags(speed: float) -> list[str]:
    """The controller's own timers at `speed`, as flags."""
    return ["--forecast-resolution", f"{_resolution(speed):g}"]


def _resolution(speed: float) -> float:
    """The controller's forecast resolution at `speed`: what the report says and the flag
    passes, from one place."""
    return DEFAULTS.forecast_resolution / speed


def _scale_class_delays(spec: dict[str, Any], speed: float) -> bool:
    """Divide by `speed`, in place, each class's own preemption delay the file `spec`
    sets: whether it set any."""
    classes = spec.get("classes")
    timed = [c for c in classes.values() if isinstance(c, dict) and "preemptionDelay" in c] \
        if isinstance(classes, dict) else []
    for c in timed:
        c["preemptionDelay"] = at_speed(c["preemptionDelay"], speed)
    return bool(timed)


def policies_at_speed(source: Path, into: Path, policy: Policy, speed: float) -> Path:
    """A copy of the policy directory `source`, whose merged policy is `policy`, in
    `into`, with its timers at `speed`."""
    into.mkdir(parents=True, exist_ok=True)
    for path in policy_files(source):
        docs = list(yaml.safe_load_all(path.read_text()))
        specs = [d["spec"] for d in docs if isinstance(d, dict) and isinstance(
            d.get("spec"), dict)]
        timed = [spec.pop(name) for spec in specs for name in TIMERS if name in spec]
        scaled = [_scale_class_delays(spec, speed) for spec in specs]
        if timed or any(scaled):
            (into / path.name).write_text(yaml.safe_dump_all(docs, sort_keys=False))
        else:
            shutil.copy(path, into / path.name)
    (into / TIMERS_FILE).write_text(yaml.safe_dump(
        {"apiVersion": "gpu-airlock.io/v1alpha1", "kind": "AirlockPolicy",
         "metadata": {"name": "timers-at-speed"}, "spec": settings_at_speed(policy, speed)},
        sort_keys=False))
    return into
