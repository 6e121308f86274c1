"""A trace: the jobs a cluster was given, one JSON object a line (JSON Lines).

    {"name": "llama-ft", "submit": 120, "namespace": "team-a", "class": "training",
     "pods": 4, "gpus": 8, "runtime": 3600}

`submit` and `runtime` are seconds (from the start of the trace, and of the job once all
its pods run); `gpus` is per pod. Optional, as a user would write them on the pods:

- `minPods`: an elastic job (`gpu-airlock.io/gang-min-size`): it runs once that many of
  its pods do, and its work (`runtime` x `pods` pod-seconds) goes faster with more;
- `requiredTopology`: the level the whole job needs (`gpu-airlock.io/required-topology`);
- `sliceTopology` and `sliceSize`: each group of `sliceSize` pods needs one domain of that
  level (`gpu-airlock.io/slice-required-topology`, `gpu-airlock.io/slice-size`);
- `expectedRuntime`: the seconds its author expects it to run
  (`gpu-airlock.io/expected-runtime`), which backfill plans with;
- `nodeSelector`: the labels its pods' nodes must carry (`spec.nodeSelector`), e.g. a GPU
  model's `{"nvidia.com/gpu.product": "NVIDIA-L4"}`;
- `gpuModels`: the GPU models of the policy it may run on, most wanted first
  (`gpu-airlock.io/gpu-models`), e.g. `["h100", "a100"]`.

Blank lines and lines starting with `#` are skipped.
A line that is not such an object fails with `file:line: message`, so a trace exported by
hand or by a script is fixed where it is wrong.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

from webhook.keys import (
    EXPECTED_RUNTIME_ANNOTATION,
    GANG_MIN_SIZE_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GPU_MODELS_ANNOTATION,
    REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    ClassName,
)
from webhook.policy.fields import NAME, is_label_key, is_label_value
from webhook.policy.gpumodels import MAX_NAMED, GpuModel, unknown_models

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
# Room for the pod index the simulation appends (`-<i>`, `-r<n>` on restarts).
_NAME_MAX = 50
_MODEL_MAX = 63
_FIELDS = ("name", "submit", "namespace", "class", "pods", "gpus", "runtime")
_OPTIONAL = ("minPods", "requiredTopology", "sliceTopology", "sliceSize", "expectedRuntime",
             "nodeSelector", "gpuModels")


@dataclass(frozen=True, slots=True)
class Job:
    name: str
    submit: float
    namespace: str
    cls: ClassName
    pods: int
    gpus: int
    runtime: float
    min_pods: int | None = None
    required_topology: str | None = None
    slice_topology: str | None = None
    slice_size: int | None = None
    expected_runtime: float | None = None
    # Sorted (label, value) pairs, so jobs that select alike compare equal.
    node_selector: tuple[tuple[str, str], ...] = ()
    gpu_models: tuple[str, ...] = ()
    # The trace's line it was read from (0: made in code), for messages about it.
    line: int = field(default=0, compare=False)

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def need(self) -> int:
        """GPUs the whole job holds while it runs."""
        return self.pods * self.gpus

    @property
    def least(self) -> int:
        """The pods it runs with: all of them, or an elastic job's minimum."""
        return self.min_pods or self.pods

    def to_json(self) -> str:
        raw: dict[str, Any] = {"name": self.name, "submit": _number(self.submit),
                               "namespace": self.namespace, "class": self.cls,
                               "pods": self.pods, "gpus": self.gpus,
                               "runtime": _number(self.runtime)}
        optional = {"minPods": self.min_pods, "requiredTopology": self.required_topology,
                    "sliceTopology": self.slice_topology, "sliceSize": self.slice_size,
                    "expectedRuntime": None if self.expected_runtime is None
                    else _number(self.expected_runtime)}
        raw.update((k, v) for k, v in optional.items() if v is not None)
        if self.node_selector:
            raw["nodeSelector"] = dict(self.node_selector)
        if self.gpu_models:
            raw["gpuModels"] = list(self.gpu_models)
        return json.dumps(raw)


def airlock_annotations(job: Job, speed: float = 1.0) -> dict[str, str]:
    """The annotations an Airlock user writes on the job's pods: a gang's size, and what
    the job states of itself. `airlock simulate` marks its pods with them, and bench.peers
    writes them on Airlock's, so both replay the same job; a replay `speed` times faster
    than the trace states a run time that much shorter, in whole seconds, as its jobs
    run."""
    stated = {GANG_SIZE_ANNOTATION: job.pods if job.pods > 1 else None,
              GANG_MIN_SIZE_ANNOTATION: job.min_pods,
              REQUIRED_TOPOLOGY_ANNOTATION: job.required_topology,
              SLICE_REQUIRED_TOPOLOGY_ANNOTATION: job.slice_topology,
              SLICE_SIZE_ANNOTATION: job.slice_size,
              EXPECTED_RUNTIME_ANNOTATION: None if job.expected_runtime is None
              else f"{math.ceil(job.expected_runtime / speed)}s",
              GPU_MODELS_ANNOTATION: ",".join(job.gpu_models) or None}
    return {key: str(value) for key, value in stated.items() if value is not None}


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
    unknown = sorted(set(raw) - set(_FIELDS) - set(_OPTIONAL))
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(unknown)}; a job has "
                         f"{', '.join(_FIELDS)}, and may have {', '.join(_OPTIONAL)}")
    cls = raw["class"]
    if cls not in get_args(ClassName):
        raise ValueError(f"class {cls!r} is not one of {', '.join(get_args(ClassName))}")
    pods = _count(raw, "pods")
    least = _count(raw, "minPods") if "minPods" in raw else None
    if least is not None and least >= pods:
        raise ValueError(f"minPods must be fewer than pods ({pods}), not {least}")
    if ("sliceTopology" in raw) != ("sliceSize" in raw):
        raise ValueError("sliceTopology and sliceSize go together")
    return Job(name=_name(raw, "name"), submit=_seconds(raw, "submit", positive=False),
               namespace=_name(raw, "namespace"), cls=cls, pods=pods,
               gpus=_count(raw, "gpus"), runtime=_seconds(raw, "runtime", positive=True),
               min_pods=least, required_topology=_level(raw, "requiredTopology"),
               slice_topology=_level(raw, "sliceTopology"),
               slice_size=_count(raw, "sliceSize") if "sliceSize" in raw else None,
               expected_runtime=_seconds(raw, "expectedRuntime", positive=True)
               if "expectedRuntime" in raw else None,
               node_selector=_selector(raw["nodeSelector"]) if "nodeSelector" in raw else (),
               gpu_models=_models(raw["gpuModels"]) if "gpuModels" in raw else ())


def _models(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not 0 < len(value) <= MAX_NAMED or not all(
            isinstance(n, str) and NAME.match(n) and len(n) <= _MODEL_MAX for n in value):
        raise ValueError(f"gpuModels must be a list of 1 to {MAX_NAMED} model names "
                         f"(e.g. [\"h100\", \"a100\"]), not {value!r}")
    if len(set(value)) < len(value):
        raise ValueError(f"gpuModels names a model twice: {value!r}")
    return tuple(value)


def _selector(value: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and is_label_key(k) and isinstance(v, str) and is_label_value(v)
            for k, v in value.items()):
        raise ValueError(f"nodeSelector must map label keys to label values, not {value!r}")
    return tuple(sorted(value.items()))


def _level(raw: dict[str, Any], key: str) -> str | None:
    """A topology level's name, checked against the policy when the job is marked."""
    return _name(raw, key) if key in raw else None


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
            job = dataclasses.replace(parse_job(text), line=number)
        except ValueError as e:
            raise TraceError(f"{source}:{number}: {e}") from None
        if job.key in seen:
            raise TraceError(f"{source}:{number}: job {job.namespace}/{job.name} is already "
                             f"on line {seen[job.key]}; names are unique per namespace")
        seen[job.key] = number
        jobs.append(job)
    jobs.sort(key=lambda j: j.submit)
    return jobs


def check_models(jobs: Iterable[Job], models: Sequence[GpuModel], source: str) -> None:
    """TraceError (`file:line: message`) for the first job that names a model the policy
    does not define, with the models on offer, as admission would deny its pods."""
    for job in jobs:
        why = unknown_models(",".join(job.gpu_models), models) if job.gpu_models else None
        if why is not None:
            raise TraceError(f"{source}:{job.line}: job {job.namespace}/{job.name}: "
                             f"gpuModels {why}")


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
