"""A storm's figures, as one JSON object (`-o json`) and as the text table drawn from it."""

from __future__ import annotations

from collections import Counter
from typing import Any

from bench.common import WEBHOOK_LATENCY, histograms
from bench.storm import figures
from bench.storm.checking import Promise
from bench.storm.storming import WEBHOOK, Run, Settings

GOAL_MS = 10.0


def pace(run: Run) -> dict[str, Any]:
    """The creation rate: over the storm (first to last pod stored) and its busiest
    second (counted from the first pod)."""
    times = run.stored()
    if len(times) < 2:
        return {"stored": len(times)}
    span = times[-1] - times[0]
    return {"stored": len(times), "firstSeconds": round(times[0], 2),
            "lastSeconds": round(times[-1], 2),
            "podsPerSecond": round((len(times) - 1) / span, 1) if span else None,
            "peakPerSecond": max(Counter(int(t - times[0]) for t in times).values())}


def outage(run: Run) -> dict[str, Any] | None:
    if run.restart is None:
        return None
    r = run.restart
    down = [m for m in run.pods if r.killed <= m.seen <= r.ready]
    return {"storedBefore": r.stored, "downSeconds": round(r.down, 2),
            "storedWhileDown": len(down)}


def verdict(latency: figures.Latency) -> str:
    """The goal against the apiserver's buckets, which bound 10 ms only by 5 and 25 ms."""
    if latency.within.get("5", 0.0) >= 0.99:
        return "met: 99% within 5 ms"
    if latency.within.get("25", 1.0) < 0.99:
        return "missed: under 99% within 25 ms"
    met = "met" if latency.p99_ms <= GOAL_MS else "missed"
    return f"{met} as interpolated between the 5 and 25 ms buckets"


def report(settings: Settings, run: Run, promises: list[Promise], errors: figures.Errors,
           loads: tuple[float, float]) -> dict[str, Any]:
    calls = sum(errors.requests.values())
    apiserver = figures.latencies(figures.since(histograms(run.after), histograms(run.before)))
    return {
        "pods": settings.pods, "objects": run.objects, "nodes": settings.nodes,
        "failurePolicy": settings.failure_policy, "restartWebhook": settings.restart,
        "loadAverage": {"before": loads[0], "after": loads[1]},
        **pace(run), "complete": run.complete, "restart": outage(run),
        "apiserver": {k: {**v.json(), "goal": verdict(v)} for k, v in apiserver.items()},
        "webhook": {k: v.json() for k, v in figures.latencies(run.own).items()},
        "seconds": round(run.seconds, 2),
        "cpuSeconds": {k: round(v, 2) for k, v in sorted(run.cpu.items(), key=lambda kv: -kv[1])},
        "webhookCpuPerCallUs": round(run.cpu[WEBHOOK] / calls * 1e6) if calls else None,
        "webhookConnections": run.connections,
        "apiserverCpuWaits": figures.cpu_waits(run.after, run.before),
        "errors": errors.json(), "failedCreates": run.failed_creates, "marks": run.marks(),
        "promises": [{"what": p.what, "held": p.held, "counts": p.counts} for p in promises],
    }


def baseline(run: Run) -> dict[str, Any]:
    """The bare endpoint's storm: its pace, the apiserver's latency for it, and the CPU
    each process used."""
    apiserver = figures.latencies(figures.since(histograms(run.after), histograms(run.before)))
    return {"pods": len(run.pods), **pace(run), "complete": run.complete,
            "apiserver": {k: v.json() for k, v in apiserver.items()},
            "errors": figures.Errors.between(run.after, run.before).failed(),
            "cpuSeconds": {k: round(v, 2) for k, v in sorted(run.cpu.items(),
                                                             key=lambda kv: -kv[1])}}


def text(figs: dict[str, Any]) -> str:
    lines = [_head(figs), _pace(figs)]
    if figs["restart"]:
        r = figs["restart"]
        lines.append(f"webhook SIGKILLed at {r['storedBefore']} pods stored, down "
                     f"{r['downSeconds']:.2f} s (to /readyz); {r['storedWhileDown']} pods "
                     "stored meanwhile")
    lines += ["", f"{WEBHOOK_LATENCY}, as the apiserver measured it over the storm:",
              *_latency_table(figs["apiserver"], with_goal=True),
              "", "airlock_admission_duration_seconds, the webhook's own (its /metrics):",
              *_latency_table(figs["webhook"], with_goal=False), _costs(figs), "", *_errors(figs),
              "", "pods: " + ", ".join(f"{n} {state}" for state, n in figs["marks"].items()),
              "promises:"]
    lines += [f"  {'held  ' if p['held'] else 'BROKEN'}  {p['what']}: {p['counts']}"
              for p in figs["promises"]]
    if "baseline" in figs:
        lines += ["", *_beside(figs, figs["baseline"])]
    lines.append(f"\nGoal: p99 <= {GOAL_MS:g} ms, 0 errors, >= 100 pods/s. The apiserver's "
                 "buckets near 10 ms are 5 and 25 ms: p99 between them is interpolated.")
    return "\n".join(lines) + "\n"


def _head(figs: dict[str, Any]) -> str:
    made = ", ".join(f"{n} {kind}s" for kind, n in figs["objects"].items())
    load = figs["loadAverage"]
    return (f"storm: {figs['pods']} GPU pods from {made}; {figs['nodes']} nodes; "
            f"failurePolicy {figs['failurePolicy']}; load average {load['before']:.2f} "
            f"before, {load['after']:.2f} after")


def _pace(figs: dict[str, Any]) -> str:
    if "podsPerSecond" not in figs:
        return f"stored: {figs['stored']} of {figs['pods']}"
    return (f"stored: {figs['stored']} of {figs['pods']}, the first {figs['firstSeconds']} s "
            f"after the workloads were created, the last {figs['lastSeconds']} s: "
            f"{figs['podsPerSecond']} pods/s (peak {figs['peakPerSecond']} in one second)")


def _costs(figs: dict[str, Any]) -> str:
    used = ", ".join(f"{name} {seconds:.1f}" for name, seconds in figs["cpuSeconds"].items())
    restarted = " (its restart's start included)" if figs["restart"] else ""
    lost = " (not counting those to the killed process)" if figs["restart"] else ""
    return (f"CPU seconds over the storm's {figs['seconds']:.1f} s: {used}; the webhook's per "
            f"call {figs['webhookCpuPerCallUs']} µs{restarted}\nconnections (TLS handshakes) "
            f"the apiserver made to the webhook: {figs['webhookConnections']}{lost}"
            + _waits(figs["apiserverCpuWaits"]))


def _waits(waits: dict[str, Any]) -> str:
    if not waits:
        return ""
    return (f"\nthe apiserver's goroutines waiting, runnable, for a CPU ({figures.GO_SCHED}): "
            f"{waits['waits']} waits, p50 {waits['p50Ms']} ms, p99 {waits['p99Ms']} ms, "
            f"{waits['seconds']} s in all")


def _beside(figs: dict[str, Any], bare: dict[str, Any]) -> list[str]:
    """Airlock's latency beside the bare endpoint's, as the apiserver measured both."""
    out = [f"the same storm with the bare endpoint in the webhook's place: {_pace(bare)}; "
           f"{bare['errors']} calls failed",
           f"  {'series':<46}{'Airlock: p50 / p99 ms, <=5ms':>30}{'bare: p50 / p99 ms, <=5ms':>30}"]

    def cell(row: dict[str, Any] | None) -> str:
        if row is None:
            return "no calls"
        return (f"{row['p50Ms']:.2f} / {row['p99Ms']:.2f}, "
                f"{row['shareWithinMs'].get('5', 0.0) * 100:.1f}%")

    for key, row in figs["apiserver"].items():
        out.append(f"  {key:<46}{cell(row):>30}{cell(bare['apiserver'].get(key)):>30}")
    used = ", ".join(f"{name} {sec:.1f}" for name, sec in bare["cpuSeconds"].items())
    return [*out, f"  CPU seconds with the bare endpoint: {used}"]


def _latency_table(rows: dict[str, dict[str, Any]], with_goal: bool) -> list[str]:
    out = [f"  {'series':<46}{'calls':>7}{'p50 ms':>8}{'p99 ms':>8}{'<=5ms':>8}{'<=25ms':>8}"
           + ("  goal" if with_goal else "")]
    for key, row in rows.items():
        share = row["shareWithinMs"]
        cells = "".join(f"{share[b] * 100:>7.1f}%" if b in share else f"{'':>8}"
                        for b in ("5", "25"))
        out.append(f"  {key:<46}{row['calls']:>7}{row['p50Ms']:>8.2f}{row['p99Ms']:>8.2f}"
                   f"{cells}" + (f"  {row['goal']}" if with_goal else ""))
    return out if rows else [*out, "  (no calls)"]


def _errors(figs: dict[str, Any]) -> list[str]:
    errors = figs["errors"]

    def listed(table: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in table.items()) or "none"

    return ["errors, as the apiserver counted them over the storm:",
            f"  requests (name/type/code/rejected): {listed(errors['requests'])}",
            f"  rejections (name/type/error/code): {listed(errors['rejections'])}",
            f"  fail-opens (name/type): {listed(errors['failOpen'])}",
            f"  FailedCreate Events (by owner kind): {listed(figs['failedCreates'])}"]
