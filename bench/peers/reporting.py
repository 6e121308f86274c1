"""The comparison as a person reads it: a markdown table, one column per system (and the
simulation of Airlock beside them), and how far the simulation is from the real run."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Summary = dict[str, Any]


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} s"


def _waits(wait: Summary | None) -> str:
    if not wait:
        return "-"
    return f"{_s(wait['p50']).removesuffix(' s')} / {_s(wait['p99'])}"


def _jobs(s: Summary) -> str:
    out = f"{s['completed']} / {s['jobs']}"
    left = [f"{s[key]} {word}" for key, word in (("stuck", "stuck"),
                                                  ("neverRunnable", "never runnable"))
            if s[key]]
    return ", ".join([out, *left])


def _class_wait(cls: str) -> Callable[[Summary], str]:
    return lambda s: _waits((s.get("classes") or {}).get(cls, {}).get("wait"))


_ROWS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("jobs completed", _jobs),
    ("makespan", lambda s: _s(s["makespan"])),
    ("wait p50 / p99", lambda s: _waits(s["wait"])),
    *((f"{cls} wait p50 / p99", _class_wait(cls))
      for cls in ("inference", "training", "scavenger")),
    ("utilization", lambda s: f"{s['utilization']:.1%}"),
    ("partial-gang GPU-hours", lambda s: f"{s['partialGangGpuSeconds'] / 3600:,.2f}"),
    ("preemptions (GPU-hours lost)",
     lambda s: f"{s['preemptions']} ({s['lostGpuSeconds'] / 3600:,.2f})"),
)


def markdown(systems: Mapping[str, Summary], simulated: Summary | None) -> str:
    """One table, a column per system (waits in trace seconds, per class too); a system
    that failed shows its error under it instead."""
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
