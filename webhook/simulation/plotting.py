"""PNG plots of one run or of runs side by side (one column each, shared axes): GPUs in
use over time by class (and held by partial gangs), the wait distribution per class, and
the queue length over time. matplotlib with the Agg backend: no display needed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from webhook.simulation.simulating import Run
from webhook.simulation.timelines import (
    PARTIAL,
    gpus_in_use,
    queued,
    waits_by_class,
)

_COLORS = {"inference": "tab:blue", "training": "tab:green", "scavenger": "tab:olive",
           PARTIAL: "tab:red"}
_ORDER = ("inference", "training", "scavenger", PARTIAL)


def _figure(runs: Sequence[Run], title: str) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4), sharey=True,
                             squeeze=False)
    fig.suptitle(title)
    row = list(axes[0])
    for ax, run in zip(row, runs, strict=True):
        ax.set_title(run.label)
    return fig, row


def _hours(times: Sequence[float]) -> list[float]:
    return [t / 3600 for t in times]


def _stacked(ax: Axes, run: Run) -> None:
    series = gpus_in_use(run.timelines)
    grid = sorted({0.0, run.end, *(t for ts, _ in series.values() for t in ts)})
    layers, labels = [], []
    for label in (k for k in _ORDER if k in series):
        times, values = series[label]
        level, i, column = 0.0, 0, []
        for at in grid:
            while i < len(times) and times[i] <= at:
                level, i = values[i], i + 1
            column.append(level)
        layers.append(column)
        labels.append(label)
    if layers:
        ax.stackplot(_hours(grid), *layers, labels=labels, step="post",
                     colors=[_COLORS[x] for x in labels])
    ax.axhline(run.shape.capacity, color="black", linewidth=0.8, linestyle="--")
    ax.set_xlabel("hours")
    ax.set_ylabel("GPUs")
    ax.legend(loc="upper right", fontsize="small")


def _waits(ax: Axes, run: Run) -> None:
    for cls, waits in waits_by_class(run.timelines).items():
        ordered = sorted(w / 60 for w in waits)
        share = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, share, where="post", label=f"{cls} ({len(ordered)})",
                color=_COLORS.get(cls))
    ax.set_xlabel("wait, minutes (submit to whole job running)")
    ax.set_ylabel("share of jobs")
    ax.legend(loc="lower right", fontsize="small")


def _queue(ax: Axes, run: Run) -> None:
    times, values = queued(run.timelines, run.end)
    ax.step(_hours(times), values, where="post")
    ax.set_xlabel("hours")
    ax.set_ylabel("jobs waiting")


def plot(runs: Sequence[Run], out: Path) -> list[Path]:
    """Write the plots into `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, title, draw in (("gpus.png", "GPUs in use", _stacked),
                              ("waits.png", "Wait per class (cumulative)", _waits),
                              ("queue.png", "Jobs waiting", _queue)):
        fig, axes = _figure(runs, title)
        for ax, run in zip(axes, runs, strict=True):
            draw(ax, run)
        fig.tight_layout()
        path = out / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
