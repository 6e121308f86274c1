"""The traces a comparison replays: a file, or a seeded family, `family:SEEDS` (`11-15`,
or `11,12,13`): one trace per seed of the repo's generator
(`webhook.simulation.generating`) with the flags `bench/traces/contended.jsonl` was
made with (60 jobs over 2 hours, training gangs of up to 8 pods of 8 GPUs), so a
comparison does not rest on one trace's few decisive jobs. Seed 4 is `contended.jsonl`
itself; each member can be written to a file with

    python -m webhook.simulation.generating --jobs 60 --hours 2 --max-pods 8 --seed S
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from webhook.simulation.generating import Mix, generate
from webhook.simulation.traces import Job, TraceError, read_trace

PREFIX = "family:"
# The flags of contended.jsonl (docs/simulate.md, "Synthetic traces"); the seed apart.
JOBS, SECONDS, MAX_PODS = 60, 2 * 3600.0, 8
# A family longer than this is a typo (1-100 read as 1-1000), not a comparison anyone waits for.
MAX_MEMBERS = 50


@dataclass(frozen=True, slots=True)
class Member:
    label: str  # the file, or `seed N`
    jobs: list[Job]


def seeds(spec: str) -> list[int]:
    """`11-15` or `11,12,13` (or both: `1-3,7`), in the order given, each once."""
    out: list[int] = []
    try:
        for part in (p.strip() for p in spec.split(",")):
            first, _, last = part.partition("-")
            low, high = int(first), int(last or first)
            if high < low:
                raise ValueError(part)
            out += [s for s in range(low, high + 1) if s not in out]
    except ValueError:
        raise TraceError(f"{PREFIX}{spec}: seeds are N, N-M or a comma-separated list of "
                         "them (family:11-15)") from None
    if not out or len(out) > MAX_MEMBERS:
        raise TraceError(f"{PREFIX}{spec}: 1 to {MAX_MEMBERS} seeds")
    return out


def member(seed: int) -> Member:
    return Member(f"seed {seed}", generate(Mix(jobs=JOBS, seconds=SECONDS, seed=seed,
                                                max_pods=MAX_PODS)))


def members(trace: str) -> list[Member]:
    """The traces `--trace` names: TraceError for a file that cannot be read, or seeds
    that cannot be parsed."""
    if trace.startswith(PREFIX):
        return [member(s) for s in seeds(trace.removeprefix(PREFIX))]
    return [Member(trace, read_trace(Path(trace)))]
