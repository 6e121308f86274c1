"""What the apiserver and the webhook counted over the storm: their /metrics read before
and after, the difference taken (both count from their start, and the plane served
other requests before the storm).

The apiserver's figures for admission webhooks (Kubernetes' apiserver/pkg/admission/
metrics): the latency histogram, by webhook, type and operation, which leaves out the
calls the webhook rejected but keeps those that failed (under `Ignore` a refused
connection is a fast call); the requests by HTTP code (0: no answer); the rejections by
error type (`calling_webhook_error`: under `Fail`, a call that failed refused the
object); and the calls that failed open. The last three are alpha metrics, created on
their first sample: absent means none.
"""

from __future__ import annotations

import ssl
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import Buckets, histograms, quantile, samples
from webhook.sandbox.processes import Webhook

REQUESTS = "apiserver_admission_webhook_request_total"
REJECTIONS = "apiserver_admission_webhook_rejection_count"
FAIL_OPEN = "apiserver_admission_webhook_fail_open_count"
# The webhook's own histogram, by endpoint (mutate, validate), from its /metrics.
OWN_LATENCY = "airlock_admission_duration_seconds"
# How long the apiserver's goroutines waited, runnable, for a CPU (Go's runtime/metrics
# /sched/latencies:seconds; its buckets are about a factor of 10 apart).
GO_SCHED = "go_sched_latencies_seconds"
# The apiserver's bounds around the goal of 10 ms: the histogram can tell no finer.
NEAR_GOAL = (0.005, 0.025)


def since(after: dict[str, Buckets], before: dict[str, Buckets]) -> dict[str, Buckets]:
    """The buckets counted between two readings of a histogram."""
    out = {}
    for key, buckets in after.items():
        earlier = dict(before.get(key, []))
        out[key] = [(le, count - earlier.get(le, 0.0)) for le, count in buckets]
    return {k: v for k, v in out.items() if v[-1][1] > 0}


def plus(a: dict[str, Buckets], b: dict[str, Buckets]) -> dict[str, Buckets]:
    """Two stretches of a histogram together (a webhook restarted counts from zero)."""
    out = dict(a)
    for key, buckets in b.items():
        earlier = dict(out.get(key, []))
        out[key] = [(le, count + earlier.get(le, 0.0)) for le, count in buckets]
    return out


def counts(after: str, before: str, metric: str, by: tuple[str, ...]
           ) -> dict[str, float]:
    """A counter's increase between two readings, summed by the labels `by` (joined by
    `/`); series that did not grow are left out."""
    def total(text: str) -> dict[str, float]:
        out: dict[str, float] = {}
        for labels, value in samples(text, metric):
            key = "/".join(labels.get(label, "") for label in by)
            out[key] = out.get(key, 0.0) + value
        return out

    earlier = total(before)
    grown = {k: v - earlier.get(k, 0.0) for k, v in total(after).items()}
    return {k: v for k, v in sorted(grown.items()) if v > 0}


@dataclass(frozen=True, slots=True)
class Latency:
    """One histogram's figures: calls, p50 and p99 (interpolated, as Prometheus does), and
    the share of calls at or under each of the bounds near the goal."""

    calls: int
    p50_ms: float
    p99_ms: float
    within: dict[str, float]  # bound in ms -> share of calls

    @staticmethod
    def of(buckets: Buckets) -> Latency:
        total = buckets[-1][1]
        bounds = dict(buckets)
        return Latency(round(total), quantile(buckets, 0.5) * 1000,
                       quantile(buckets, 0.99) * 1000,
                       {f"{b * 1000:g}": bounds[b] / total for b in NEAR_GOAL if b in bounds})

    def json(self) -> dict[str, Any]:
        return {"calls": self.calls, "p50Ms": round(self.p50_ms, 2),
                "p99Ms": round(self.p99_ms, 2),
                "shareWithinMs": {k: round(v, 4) for k, v in self.within.items()}}


def latencies(buckets: dict[str, Buckets]) -> dict[str, Latency]:
    return {key: Latency.of(b) for key, b in sorted(buckets.items())}


@dataclass(frozen=True, slots=True)
class Errors:
    """The apiserver's error counters for the webhooks over the storm."""

    requests: dict[str, float]  # name/type/code/rejected -> calls
    rejections: dict[str, float]  # name/type/error_type/rejection_code -> calls
    fail_open: dict[str, float]  # name/type -> calls

    @staticmethod
    def between(after: str, before: str) -> Errors:
        return Errors(counts(after, before, REQUESTS, ("name", "type", "code", "rejected")),
                      counts(after, before, REJECTIONS,
                             ("name", "type", "error_type", "rejection_code")),
                      counts(after, before, FAIL_OPEN, ("name", "type")))

    def failed(self) -> int:
        """Calls that did not answer 200, were rejected or failed open."""
        not_ok = sum(v for k, v in self.requests.items() if k.split("/")[2] != "200")
        return round(not_ok + sum(self.rejections.values()) + sum(self.fail_open.values()))

    def of(self, table: dict[str, float], webhook: str) -> int:
        return round(sum(v for k, v in table.items() if k.startswith(f"{webhook}/")))

    def json(self) -> dict[str, Any]:
        return {"requests": _ints(self.requests), "rejections": _ints(self.rejections),
                "failOpen": _ints(self.fail_open)}


def _ints(table: dict[str, float]) -> dict[str, int]:
    return {k: round(v) for k, v in table.items()}


def cpu_waits(after: str, before: str) -> dict[str, Any]:
    """The apiserver's goroutines' waits for a CPU over the storm: how many, p50 and p99,
    and their sum (many goroutines wait at once, so it may exceed the storm's length)."""
    waits = since(histograms(after, GO_SCHED, lambda _: "apiserver"),
                  histograms(before, GO_SCHED, lambda _: "apiserver")).get("apiserver")
    if not waits:
        return {}
    total = sum(v for _, v in samples(after, GO_SCHED + "_sum")) - sum(
        v for _, v in samples(before, GO_SCHED + "_sum"))
    latency = Latency.of(waits)
    return {"waits": latency.calls, "p50Ms": round(latency.p50_ms, 3),
            "p99Ms": round(latency.p99_ms, 2), "seconds": round(total, 2)}


def own_latency(hook: Webhook) -> dict[str, Buckets]:
    """The webhook's own histogram, by endpoint: the time from its reading a request to
    its answer, without TLS, the network and the apiserver's side of the call."""
    context = ssl.create_default_context(cafile=str(hook.certs.ca))
    with urllib.request.urlopen(f"{hook.url}/metrics", context=context, timeout=10) as r:
        text = r.read().decode()
    return histograms(text, OWN_LATENCY, lambda labels: labels.get("endpoint"))



def connections(port: int) -> set[str]:
    """The TCP connections to `port` the kernel still knows of, each by its client's end:
    open, or closed less than a minute ago (TIME-WAIT lasts 60 s on Linux, on the side
    that closed first). A connection reset (a process killed) leaves no trace."""
    out = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            local, remote = line.split()[1:3]
            if _port(remote) == port:
                out.add(local)
            elif _port(local) == port and _port(remote) != 0:
                out.add(remote)
    return out


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1], 16)
