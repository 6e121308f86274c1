"""A trace: the jobs a cluster was given, one JSON object a line (JSON Lines).

    {"name": "llama-ft", "submit": 120, "namespace": "team-a", "class": "training",
     "pods": 4, "gpus": 8, "runtime": 3600}

`submit` and `runtime` are seconds (from the start of the trace, and of the job once all
its pods run); `gpus` is per pod. Blank lines and lines starting with `#` are skipped.
A line that is not such an object fails with `file:line: message`, so a trace exported by
hand or by a script is fixed where it is wrong.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from webhook.keys import ClassName

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Room for the pod index the simulation appends (`-<i>`, `-r<n>` on restarts).
_NAME_MAX = 50
_FIELDS = ("name", "submit", "namespace", "class", "pods", "gpus", "runtime")


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    submit: float
    namespace: str
    cls: ClassName
    pods: int
    gpus: int
    runtime: float

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def need(self) -> int:
        """GPUs the whole job holds while it runs."""
        return self.pods * self.gpus

    def to_json(self) -> str:
        return json.dumps({"name": self.name, "submit": _number(self.submit),
                           "namespace": self.namespace, "class": self.cls, "pods": self.pods,
                           "gpus": self.gpus, "runtime": _number(self.runtime)})


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


class TraceError(ValueError):
    """What is wrong with a trace, as `file:line: message`."""


def _name(raw: dict[str, Any], key: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not _DNS_LABEL.match(value) or len(value) > _NAME_MAX:
        raise ValueError(f"{key} {value!r} must be lowercase letters, digits and '-' "
                         f"(at most {_NAME_MAX})")
    return value


def _count(raw: dict[str, Any], key: str) -> int:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{key} must be a whole number of at least 1, not {value!r}")
    return value


def _seconds(raw: dict[str, Any], key: str, *, positive: bool) -> float:
    value = raw[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or \
            not math.isfinite(value) or value < 0 or (positive and value == 0):
        bound = "more than 0" if positive else "at least 0"
        raise ValueError(f"{key} must be a number of seconds, {bound}, not {value!r}")
    return float(value)


def parse_job(text: str) -> Job:
    """One line's job; ValueError with the message (no place) when it is wrong."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"not JSON: {e.msg} (column {e.colno})") from None
    if not isinstance(raw, dict):
        raise ValueError("a job is a JSON object")
    missing = [k for k in _FIELDS if k not in raw]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; a job has "
                         f"{', '.join(_FIELDS)}")
    cls = raw["class"]
    if cls not in get_args(ClassName):
        raise ValueError(f"class {cls!r} is not one of {', '.join(get_args(ClassName))}")
    return Job(name=_name(raw, "name"), submit=_seconds(raw, "submit", positive=False),
               namespace=_name(raw, "namespace"), cls=cls, pods=_count(raw, "pods"),
               gpus=_count(raw, "gpus"), runtime=_seconds(raw, "runtime", positive=True))


def parse_trace(lines: Iterable[str], source: str) -> list[Job]:
    """The jobs of a trace, in submit order (a stable sort: lines with the same submit
    keep their order)."""
    jobs: list[Job] = []
    seen: dict[tuple[str, str], int] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            job = parse_job(text)
        except ValueError as e:
            raise TraceError(f"{source}:{number}: {e}") from None
        if job.key in seen:
            raise TraceError(f"{source}:{number}: job {job.namespace}/{job.name} is already "
                             f"on line {seen[job.key]}; names are unique per namespace")
        seen[job.key] = number
        jobs.append(job)
    jobs.sort(key=lambda j: j.submit)
    return jobs


def read_trace(path: Path) -> list[Job]:
    try:
        with path.open(encoding="utf-8") as f:
            return parse_trace(f, str(path))
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror}") from None
    except UnicodeDecodeError:
        raise TraceError(f"{path}: not UTF-8 text") from None


def dump_trace(jobs: Iterable[Job]) -> Iterator[str]:
    for job in jobs:
        yield job.to_json() + "\n"
