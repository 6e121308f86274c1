"""Time-based fair share: what each queue has used lately, in GPU-seconds that decay
exponentially with a half-life, so last week's burst weighs less than this morning's.

A queue's share is its decayed usage divided by its weight; lower goes first. A gang
also pays an entry charge when it is admitted (its GPUs times `entry_seconds`), so a
burst of submissions cannot all slip in at the same low share before any of them has
run long enough to count. With a half-life of 0 only the present counts: usage is the
GPUs a queue holds now (the charge is then its GPUs).

Pure: the caller keeps a `FairShare` between rounds and advances it with the clock.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.records import dump_memory, load_memory


@dataclass(frozen=True, slots=True)
class FairShare:
    half_life: float
    entry_seconds: float
    at: float
    # Decayed GPU-seconds per queue (GPUs, with a half-life of 0).
    usage: Mapping[str, float] = field(default_factory=dict)

    def advance(self, now: float, holding: Mapping[str, GpuEquivalents]) -> FairShare:
        """The usage at `now`, the queues having held `holding` GPUs since `at`."""
        elapsed = max(now - self.at, 0.0)
        if self.half_life <= 0:
            return replace(self, at=now, usage={q: float(g) for q, g in holding.items() if g})
        decay = 0.5 ** (elapsed / self.half_life)
        # The exact integral of a constant use under exponential decay over `elapsed`.
        gained = (1 - decay) * self.half_life / math.log(2)
        usage = {q: u * decay for q, u in self.usage.items()}
        for queue, held in holding.items():
            usage[queue] = usage.get(queue, 0.0) + held * gained
        return replace(self, at=now, usage={q: u for q, u in usage.items() if u > 1e-9})

    def entry(self, gpus: GpuEquivalents) -> float:
        return float(gpus) if self.half_life <= 0 else gpus * self.entry_seconds

    def charge(self, queue: str, gpus: GpuEquivalents) -> FairShare:
        usage = dict(self.usage)
        usage[queue] = usage.get(queue, 0.0) + self.entry(gpus)
        return replace(self, usage=usage)

    def share(self, queue: str, weight: float) -> float:
        return self.usage.get(queue, 0.0) / weight

    def dumps(self) -> str:
        """What a new leader needs to carry on: the usage and when it was taken."""
        return dump_memory("fairShare", {"at": self.at, "usage": dict(self.usage)})

    def carried_on(self, text: str) -> FairShare:
        """This fair share with the usage a former leader kept (its settings are this
        one's, from the current policy); unchanged when `text` is not readable."""
        raw = load_memory("fairShare", text, legacy=lambda raw: raw)
        if raw is None:
            return self
        try:
            usage = {str(q): float(u) for q, u in raw["usage"].items()}
            return replace(self, at=float(raw["at"]), usage=usage)
        except (ValueError, KeyError, TypeError, AttributeError):
            return self
