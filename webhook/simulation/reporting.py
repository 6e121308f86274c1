"""A run's figures as text a person reads: one column per run, so two runs (two
schedulers, or a policy and its proposed change) compare line by line."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

Summary = dict[str, Any]


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    if value < 120:
        return f"{value:.0f}s"
    if value < 7200:
        return f"{value / 60:.1f}m"
    return f"{value / 3600:.1f}h"


def _gpu_hours(value: float) -> str:
    return f"{value / 3600:,.1f}"


_ROWS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("jobs", lambda s: str(s["jobs"])),
    ("completed", lambda s: str(s["completed"])),
    ("never runnable", lambda s: str(s["neverRunnable"])),
    ("stuck at the end", lambda s: str(s["stuck"])),
    ("wait p50", lambda s: _seconds(s["wait"]["p50"])),
    ("wait p99", lambda s: _seconds(s["wait"]["p99"])),
    ("utilization", lambda s: f"{s['utilization']:.1%}"),
    ("partial-gang GPU-hours", lambda s: _gpu_hours(s["partialGangGpuSeconds"])),
    ("preemptions", lambda s: str(s["preemptions"])),
    ("backfilled admissions", lambda s: str(s["backfilled"])),
    ("GPU-hours lost to preemption", lambda s: _gpu_hours(s["lostGpuSeconds"])),
)


_PREDICTIONS: tuple[tuple[str, Callable[[Summary], str]], ...] = (
    ("gangs that waited > 5m", lambda s: str(s["waitedLong"])),
    ("  with a known prediction", lambda s: str(s["predicted"])),
    ("  first said unknown", lambda s: str(s["unknownFirst"])),
    ("  median prediction error", lambda s: _seconds(s["medianErrorSeconds"])),
    ("  ... as a share of the wait", lambda s: "-" if s["medianErrorShareOfWait"] is None
     else f"{s['medianErrorShareOfWait']:.0%}"),
    ("  within ±25% (or ±60s)", lambda s: "-" if s["withinShare"] is None
     else f"{s['withinShare']:.0%}"),
)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    line = "  ".join
    out = [line(h.ljust(w) if i == 0 else h.rjust(w)
                for i, (h, w) in enumerate(zip(header, widths, strict=True)))]
    out += [line(c.ljust(w) if i == 0 else c.rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths, strict=True))) for r in rows]
    return out


def _group_rows(runs: Sequence[Summary], group: str) -> list[list[str]]:
    names = sorted({n for s in runs for n in s[group]})
    rows = []
    for name in names:
        parts = [s[group].get(name) for s in runs]
        rows.append([f"  {name}: wait p50 / p99"] + [
            f"{_seconds(p['wait']['p50'])} / {_seconds(p['wait']['p99'])}" if p else "-"
            for p in parts])
    return rows


def _cluster(described: Mapping[str, Any]) -> str:
    if "pools" not in described:
        return (f"{described['nodes']} nodes x {described['gpusPerNode']} GPUs "
                f"({described['gpus']} GPUs), {described['nodesPerDomain']} nodes per domain")
    pools = ", ".join(f"{p['name']} {p['count']}x{p['gpusPerNode']}"
                      + (f"/{p['nodesPerDomain']}" if p["nodesPerDomain"] else "")
                      for p in described["pools"])
    return f"{described['nodes']} nodes ({described['gpus']} GPUs) in pools {pools}"


def render(runs: Sequence[Summary]) -> str:
    lines = [f"cluster: {_cluster(runs[0]['cluster'])}; makespan "
             + ", ".join(f"{s['label']} {_seconds(s['makespan'])}" for s in runs), ""]
    rows = [[label] + [show(s) for s in runs] for label, show in _ROWS]
    rows += [[label] + [show(s["predictions"]) if "predictions" in s else "-" for s in runs]
             for label, show in _PREDICTIONS if any("predictions" in s for s in runs)]
    rows += [["per class"] + [""] * len(runs), *_group_rows(runs, "classes"),
             ["per namespace"] + [""] * len(runs), *_group_rows(runs, "namespaces")]
    lines += _table([""] + [s["label"] for s in runs], rows)
    for s in runs:
        if s["neverRunnableJobs"]:
            shown = s["neverRunnableJobs"][:10]
            more = len(s["neverRunnableJobs"]) - len(shown)
            lines.append(f"never runnable under {s['label']}: {', '.join(shown)}"
                         + (f" and {more} more" if more else ""))
    return "\n".join(lines)
