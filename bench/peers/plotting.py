"""`spread.png`: the figures a comparison is read by, one pane each (utilization, p99
wait, training's mean wait, GPU-hours lost to preemption), a point per system at its
median over the replays, with an error bar from the lowest run to the highest and each
run a faint dot beside it.
matplotlib with the Agg backend, as `webhook.simulation.plotting`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from bench.peers.aggregating import Summary, flatten, ran, spread

# (figure, pane title, scale from the figure to what the axis shows)
PANES: tuple[tuple[str, str, Callable[[float], float]], ...] = (
    ("utilization", "utilization, %", lambda v: 100 * v),
    ("wait.p99", "wait p99, s", lambda v: v),
    ("classes.training.wait.mean", "training wait mean, s", lambda v: v),
    ("lostGpuSeconds", "GPU-hours lost to preemption", lambda v: v / 3600),
)


def plot_spread(columns: Mapping[str, Sequence[Summary]], out: Path) -> Path:
    """Write spread.png into `out`: each system of `columns` (its runs' summaries; the
    runs that failed left out), medians with min-max bars, and the runs themselves."""
    out.mkdir(parents=True, exist_ok=True)
    shown = {name: ran(runs) for name, runs in columns.items() if ran(runs)}
    most = max((len(runs) for runs in shown.values()), default=0)
    fig, axes = plt.subplots(1, len(PANES), figsize=(4.0 * len(PANES), 3.5),
                             layout="constrained", squeeze=False)
    fig.suptitle(f"Median and spread (min-max) over {most} replay{'s' * (most != 1)}")
    for ax, (key, title, scale) in zip(axes.flat, PANES, strict=True):
        for x, runs in enumerate(shown.values()):
            s = spread(runs).get(key)
            if s is None or s.median is None or s.low is None or s.high is None:
                continue
            m = scale(s.median)
            bar = ax.errorbar([x], [m], yerr=[[m - scale(s.low)], [scale(s.high) - m]],
                              fmt="o", capsize=6)
            values = [scale(v) for v in (flatten(r).get(key) for r in runs) if v is not None]
            ax.plot([x + 0.15] * len(values), values, ".", alpha=0.4,
                    color=bar.lines[0].get_color())
        ax.set_title(title, fontsize="medium")
        ax.set_xticks(range(len(shown)), list(shown), rotation=30, ha="right",
                      fontsize="small")
        ax.set_xlim(-0.5, len(shown) - 0.5)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)  # room above the highest bar's cap
    path = out / "spread.png"
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
