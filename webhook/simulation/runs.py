"""What a simulated run gives back: its timelines and what the replay cost."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from webhook.simulation.clusters import Shape
from webhook.simulation.forecasts import accuracy
from webhook.simulation.timelines import Timeline, summarize

Scheduler = Literal["airlock", "stock"]
SCHEDULERS: tuple[Scheduler, ...] = ("airlock", "stock")


@dataclass(slots=True)
class Stats:
    decide_calls: int = 0
    decide_seconds: float = 0.0
    events: int = 0


@dataclass(frozen=True, slots=True)
class Run:
    label: str
    scheduler: Scheduler
    shape: Shape
    timelines: list[Timeline]
    end: float
    stats: Stats
    # Whether each gang's predicted start was recorded (`forecasts`).
    predicted: bool = False

    def summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"scheduler": self.scheduler, "label": self.label,
                               "cluster": self.shape.described()}
        out.update(summarize(self.timelines, self.shape.capacity))
        if self.predicted:
            out["predictions"] = accuracy(self.timelines)
        return out
