"""PNG plots of one run or of several on a grid (up to three panes a row, shared axes,
one legend), each figure at most some 1,500 pixels wide: GPUs in use over time by class
(and held by partial gangs), the wait distribution per class, and the queue length over
time. matplotlib with the Agg backend: no display needed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from webhook.simulation.runs import Run
from webhook.simulation.timelines import (
    PARTIAL,
    gpus_in_use,
    queued,
    waits_by_class,
)

_COLORS = {"inference": "tab:blue", "training": "tab:green", "scavenger": "tab:olive",
           PARTIAL: "tab:red"}
_ORDER = ("inference", "training", "scavenger", PARTIAL)


# Panes a row, and each pane's size in inches at the 100 dpi the files are saved at: five
# runs make a 3 x 2 grid 1,500 pixels wide that a page shows without scrolling.
_COLUMNS = 3
_PANE = (5.0, 3.0)


def _figure(runs: Sequence[Run], title: str) -> tuple[Figure, list[Axes]]:
    """A pane per run, and the grid's spare panes removed. With shared axes only the
    outer panes keep their tick labels: a pane left without one below it gets its own."""
    columns = min(len(runs), _COLUMNS)
    rows = -(-len(runs) // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(_PANE[0] * columns, _PANE[1] * rows),
                             sharex=True, sharey=True, squeeze=False, layout="constrained")
    fig.suptitle(title)
    panes = list(grid.flat)
    for spare in panes[len(runs):]:
        spare.remove()
    for i, (ax, run) in enumerate(zip(panes, runs, strict=False)):
        ax.set_title(run.label, fontsize="medium")
        if i + columns >= len(runs):
            ax.xaxis.set_tick_params(labelbottom=True)
    return fig, panes[:len(runs)]


def _labels(axes: Sequence[Axes], x: str, y: str) -> None:
    """Axis titles on the outer panes only: the bottom one of each column, the first of
    each row."""
    columns = min(len(axes), _COLUMNS)
    for i, ax in enumerate(axes):
        if i + columns >= len(axes):
            ax.set_xlabel(x)
        if i % columns == 0:
            ax.set_ylabel(y)


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


def _waits(ax: Axes, run: Run) -> None:
    for cls, waits in waits_by_class(run.timelines).items():
        ordered = sorted(w / 60 for w in waits)
        share = [(i + 1) / len(ordered) for i in range(len(ordered))]
        ax.step(ordered, share, where="post", label=f"{cls} ({len(ordered)})",
                color=_COLORS.get(cls))
    # Per pane: the counts in its labels differ from run to run.
    ax.legend(loc="lower right", fontsize="x-small")


def _queue(ax: Axes, run: Run) -> None:
    times, values = queued(run.timelines, run.end)
    ax.step(_hours(times), values, where="post")


def plot(runs: Sequence[Run], out: Path) -> list[Path]:
    """Write the plots into `out`; the files written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, title, draw, x, y in (
            ("gpus.png", "GPUs in use", _stacked, "hours", "GPUs"),
            ("waits.png", "Wait per class (cumulative)", _waits,
             "wait, minutes (submit to whole job running)", "share of jobs"),
            ("queue.png", "Jobs waiting", _queue, "hours", "jobs waiting")):
        fig, axes = _figure(runs, title)
        for ax, run in zip(axes, runs, strict=True):
            draw(ax, run)
        _labels(axes, x, y)
        if draw is _stacked:
            # One legend for all panes: a class has the same colour in each.
            handles = {label: handle for ax in axes
                       for handle, label in zip(*ax.get_legend_handles_labels(), strict=True)}
            fig.legend(handles.values(), handles.keys(), loc="outside upper right",
                       ncols=len(handles), fontsize="small")
        path = out / name
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)
    return written
