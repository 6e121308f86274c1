"""From lifecycle events (`controller.core.lifecycle`) to a trace `airlock simulate`
replays: the events are read back from the controller's log, or made by a watch of
`airlock record`'s own, then folded into one job per gang or single pod.

What a recording cannot know is said in the trace itself, as `#` comments the simulation
skips: a job still running when the recording ended has the run time it had so far; one
that never started has no run time at all, and is only listed."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from typing import Any, cast, get_args

from webhook.controller.core.identities import UnitId
from webhook.controller.core.lifecycle import EVENTS, LIFECYCLE_LOGGER, LifeEvent
from webhook.keys import ClassName
from webhook.simulation.traces import Job

# A log line longer than this is no event the controller wrote (its longest is a few
# hundred characters); the reader stops at it rather than hold it.
MAX_LINE = 16_384
# Gangs and pods a recording keeps apart: a month of a large cluster's jobs, and a bound
# on what a hostile log can make the reader hold.
MAX_UNITS = 1_000_000
_TEXT_MAX = 253
_MAX_PODS = 100_000
_MAX_GPUS = 1024
_NAME_MAX = 50
_NOT_NAME = re.compile(r"[^a-z0-9-]+")


class RecordError(ValueError):
    """What is wrong with a lifecycle log, as `file:line: message`."""


@dataclass(frozen=True, slots=True)
class Run:
    """A gang or single pod as a recording saw it: its last run (start and end), or the
    start of one still going, or none."""

    unit: UnitId
    cls: str
    pods: int
    gpus: float
    model: str | None
    submitted: float
    started: float | None = None
    ended: float | None = None


def fold(events: Iterable[LifeEvent]) -> tuple[list[Run], float]:
    """Each unit's run, from its events in the order they happened, and the time of the
    last event (when a log's recording ended)."""
    runs: dict[UnitId, Run] = {}
    last = 0.0
    for event in events:
        seen = runs.get(event.unit)
        if seen is None and len(runs) >= MAX_UNITS:
            raise RecordError(f"more than {MAX_UNITS:,} gangs and pods")
        last = max(last, event.at)
        run = Run(event.unit, event.cls, event.pods, float(event.gpus), event.model,
                  min(event.submitted, seen.submitted) if seen else event.submitted,
                  seen.started if seen else None, seen.ended if seen else None)
        if event.event == "started":
            run = replace(run, started=event.at, ended=None)
        elif event.event == "ended" and event.started is not None:
            run = replace(run, started=event.started, ended=event.at)
        elif event.event == "preempted" and run.ended is None:
            run = replace(run, started=None)
        runs[event.unit] = replace(run, model=run.model or (seen.model if seen else None))
    return list(runs.values()), last


def _name(unit: UnitId, taken: set[tuple[str, str]]) -> str:
    """A trace name for the unit: its own, made a DNS label short enough, unique in its
    namespace."""
    base = _NOT_NAME.sub("-", unit.name.lower()).strip("-")[:_NAME_MAX - 6].strip("-") \
        or "job"
    name, n = base, 1
    while (unit.namespace, name) in taken:
        n += 1
        name = f"{base}-{n}"
    taken.add((unit.namespace, name))
    return name


def trace_lines(runs: Iterable[Run], until: float) -> Iterator[str]:
    """The trace: a line per job that ran (or runs at `until`, with the run time it had),
    in submit order, seconds from the first submit; a `#` line for each the simulation
    cannot replay, and why."""
    ordered = sorted(runs, key=lambda r: (r.submitted, r.unit))
    start = ordered[0].submitted if ordered else 0.0
    taken: set[tuple[str, str]] = set()
    for run in ordered:
        submit = float(max(round(run.submitted - start), 0))
        said = f"{run.unit.path} ({run.cls}, {run.pods} x {run.gpus:g} GPUs, " \
            f"submitted at {submit:g} s)"
        why = f"class {run.cls!r} is not one the simulation knows" \
            if run.cls not in get_args(ClassName) else \
            f"a trace's namespace has at most {_NAME_MAX} characters" \
            if len(run.unit.namespace) > _NAME_MAX else None
        if why is not None:
            yield f"# not replayable: {said}: {why}\n"
            continue
        if run.started is None:
            yield f"# never started while recorded: {said}\n"
            continue
        running = run.ended is None
        end = until if run.ended is None else run.ended
        job = Job(name=_name(run.unit, taken), submit=submit,
                  namespace=run.unit.namespace, cls=cast(ClassName, run.cls), pods=run.pods,
                  gpus=max(math.ceil(run.gpus), 1),
                  runtime=float(max(round(end - run.started), 1)))
        raw = json.loads(job.to_json())
        if run.model:
            raw["gpuModels"] = [run.model]
        if running:
            yield f"# still running when the recording ended: {said}; its runtime is what " \
                "it had run\n"
        yield json.dumps(raw) + "\n"


# --- the controller's log -----------------------------------------------------------------

def _text(raw: dict[str, Any], key: str, optional: bool = False) -> str | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value or len(value) > _TEXT_MAX:
        raise ValueError(f"{key} must be text of 1 to {_TEXT_MAX} characters, not "
                         f"{str(value)[:60]!r}")
    return value


def _number(raw: dict[str, Any], key: str, most: float = math.inf,
            optional: bool = False) -> float | None:
    value = raw.get(key)
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or not 0 <= value <= most:
        raise ValueError(f"{key} must be a number from 0 to {most:g}, not "
                         f"{str(value)[:60]!r}")
    return float(value)


def parse_event(raw: dict[str, Any]) -> LifeEvent:
    """One lifecycle line's event; ValueError saying what is wrong."""
    event = raw.get("event")
    if event not in EVENTS:
        raise ValueError(f"event {str(event)[:60]!r} is not one of {', '.join(EVENTS)}")
    kind = raw.get("unitKind")
    if kind not in ("gang", "pod"):
        raise ValueError(f"unitKind {str(kind)[:60]!r} is not gang or pod")
    unit = UnitId(kind, str(_text(raw, "namespace")), str(_text(raw, "unit")))
    at_key = {"admitted": "admitTime", "started": "startTime"}.get(event, "endTime")
    started = _number(raw, "startTime", optional=True) if event in ("preempted", "ended") \
        else None
    pods = _number(raw, "pods", _MAX_PODS)
    return LifeEvent(event=event, unit=unit, cls=str(_text(raw, "class")),
                     pods=max(int(pods or 0), 1), gpus=_number(raw, "gpus", _MAX_GPUS) or 0,
                     model=_text(raw, "model", optional=True),
                     submitted=_number(raw, "submitTime") or 0.0,
                     at=_number(raw, at_key) or 0.0, started=started,
                     reason=_text(raw, "reason", optional=True))


def parse_log(lines: Iterable[str], source: str) -> Iterator[LifeEvent]:
    """The lifecycle events in a controller's log, as they are read. Its other lines, JSON
    or not, are passed over; a lifecycle line that is wrong stops it with
    `file:line: message`."""
    for number, line in enumerate(lines, start=1):
        if len(line) >= MAX_LINE:
            raise RecordError(f"{source}:{number}: a line of {MAX_LINE:,} characters or more "
                              "is no lifecycle event")
        if LIFECYCLE_LOGGER not in line:
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as e:
            raise RecordError(f"{source}:{number}: not JSON: {e.msg} (column {e.colno})") \
                from None
        if not isinstance(raw, dict) or raw.get("logger") != LIFECYCLE_LOGGER:
            continue
        try:
            event = parse_event(raw)
        except ValueError as e:
            raise RecordError(f"{source}:{number}: {e}") from None
        yield event
