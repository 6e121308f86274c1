"""The comparison as a person reads it: a markdown table, one column per system (and the
simulation of Airlock beside them), and how far the simulation is from the real run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Summary = dict[str, Any]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


_ROWS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("jobs completed", lambda s: f"{s['completed']} / {s['jobs']}"),
    ("stuck at the end", lambda s: str(s["stuck"])),
    ("never runnable", lambda s: str(s["neverRunnable"])),
    ("makespan", lambda s: _s(s["makespan"])),
    ("wait p50", lambda s: _s(s["wait"]["p50"])),
    ("wait p99", lambda s: _s(s["wait"]["p99"])),
    ("utilization", lambda s: f"{s['utilization']:.1%}"),
    ("partial-gang GPU-hours", lambda s: f"{s['partialGangGpuSeconds'] / 3600:,.2f}"),
    ("preemptions", lambda s: str(s["preemptions"])),
    ("GPU-hours lost to preemption", lambda s: f"{s['lostGpuSeconds'] / 3600:,.2f}"),
)


def markdown(systems: Mapping[str, Summary], simulated: Summary | None) -> str:
    """The table; a system that failed shows its error under it instead."""
    ran = {name: s for name, s in systems.items() if "error" not in s}
    columns = dict(ran)
    if simulated is not None:
        columns["airlock simulate"] = simulated
    lines = ["| | " + " | ".join(columns) + " |",
             "|---|" + "---:|" * len(columns)]
    lines += [f"| {label} | " + " | ".join(show(s) for s in columns.values()) + " |"
              for label, show in _ROWS]
    # A build's error ends with the Go tool's own lines: the table keeps the first.
    lines += [f"\n**{name}** did not run: {s['error'].splitlines()[0]}"
              for name, s in systems.items() if "error" in s]
    return "\n".join(lines) + "\n"


def gap(real: Summary, simulated: Summary) -> dict[str, float | None]:
    """Simulated minus real: wait in seconds, utilization in points of the cluster."""
    def minus(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else round(a - b, 1)

    return {
        "waitP50": minus(simulated["wait"]["p50"], real["wait"]["p50"]),
        "waitP99": minus(simulated["wait"]["p99"], real["wait"]["p99"]),
        "utilization": round(simulated["utilization"] - real["utilization"], 4),
    }
