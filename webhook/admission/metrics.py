"""The webhook's Prometheus metrics, in a registry of their own so that several servers
(tests) can live in one process.

The per-request ones are plain numbers, turned into metric families only when scraped:
prometheus_client's children take a lock and check their state on every update, which
cost about 5% of a request's time (py-spy). The server is one thread, so nothing races.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Iterator
from typing import Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    HistogramMetricFamily,
    Metric,
)

from webhook.admission.reviews import Outcome

Endpoint = Literal["mutate", "validate", "claims"]
Result = Literal["allowed", "denied", "bad-request"]
ENDPOINTS: tuple[Endpoint, ...] = get_args(Endpoint)
RESULTS: tuple[Result, ...] = get_args(Result)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
# As Prometheus writes `le`: the bounds' reprs, then +Inf.
_BUCKET_LABELS = (*map(repr, _LATENCY_BUCKETS), "+Inf")
# How late the event loop runs what is due: a review waits that long before it is read.
# Past the apiserver's 3 s timeout, every review meanwhile fails open.
_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 3.0)
_LAG_LABELS = (*map(repr, _LAG_BUCKETS), "+Inf")


def _cumulative(labels: tuple[str, ...], counts: list[int]) -> list[tuple[str, float]]:
    """A histogram's buckets as Prometheus states them: each counts all below its bound."""
    return list(zip(labels, itertools.accumulate(counts), strict=True))


class _Requests:
    """Admission requests and their durations, and what was decided for each pod."""

    def __init__(self) -> None:
        # Every series exists from the start, so a rate over one is never empty.
        self.results = dict.fromkeys(itertools.product(ENDPOINTS, RESULTS), 0)
        self.buckets = {e: [0] * len(_BUCKET_LABELS) for e in ENDPOINTS}
        self.seconds = dict.fromkeys(ENDPOINTS, 0.0)
        self.decisions = dict.fromkeys(OUTCOMES, 0)

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "airlock_admission_requests", "Admission requests by endpoint and result.",
            labels=("endpoint", "result"))
        for labels, count in self.results.items():
            requests.add_metric(labels, count)
        yield requests
        duration = HistogramMetricFamily(
            "airlock_admission_duration_seconds", "Time to answer an admission request.",
            labels=("endpoint",))
        for endpoint, counts in self.buckets.items():
            duration.add_metric((endpoint,), _cumulative(_BUCKET_LABELS, counts),
                                self.seconds[endpoint])
        yield duration
        decisions = CounterMetricFamily(
            "airlock_decisions",
            "Pods by what admission decided when they were created: their class, "
            "unclassified, out-of-scope, or why nothing was decided. One per pod.",
            labels=("class",))
        for outcome, count in self.decisions.items():
            decisions.add_metric((outcome,), count)
        yield decisions


class _Lag:
    """The event loop's lag, sampled by a timer that measures how late it wakes."""

    def __init__(self) -> None:
        self.buckets = [0] * (len(_LAG_BUCKETS) + 1)
        self.seconds = 0.0

    def collect(self) -> Iterator[Metric]:
        lag = HistogramMetricFamily(
            "airlock_event_loop_lag_seconds",
            "How late the event loop ran a timer: how long reviews wait behind work that "
            "holds it.")
        lag.add_metric((), _cumulative(_LAG_LABELS, self.buckets), self.seconds)
        yield lag


class WebhookMetrics:
    def __init__(self, seconds_to_expiry: Callable[[], float],
                 policy_loaded: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        self._requests = _Requests()
        self.registry.register(self._requests)
        self._lag = _Lag()
        self.registry.register(self._lag)
        self.policy_reloads = Counter(
            "airlock_policy_reloads", "Policy reloads by result.", ("result",),
            registry=self.registry)
        expiry = Gauge("airlock_certificate_expiry_seconds",
                       "Seconds until the serving certificate expires.", registry=self.registry)
        expiry.set_function(seconds_to_expiry)
        loaded = Gauge("airlock_policy_loaded", "1 when a valid policy is loaded.",
                       registry=self.registry)
        loaded.set_function(policy_loaded)
        for result in ("ok", "failed"):
            self.policy_reloads.labels(result)

    def answered(self, endpoint: Endpoint, allowed: bool, outcome: Outcome | None,
                 seconds: float) -> None:
        """A review answered; `outcome` is what it decided for a pod, if it decided."""
        r = self._requests
        r.results[endpoint, "allowed" if allowed else "denied"] += 1
        r.buckets[endpoint][bisect.bisect_left(_LATENCY_BUCKETS, seconds)] += 1
        r.seconds[endpoint] += seconds
        if outcome is not None:
            r.decisions[outcome] += 1

    def lagged(self, seconds: float) -> None:
        """The event loop ran a timer `seconds` late."""
        self._lag.buckets[bisect.bisect_left(_LAG_BUCKETS, seconds)] += 1
        self._lag.seconds += seconds

    def rejected(self, endpoint: Endpoint) -> None:
        """A body that is not a review: counted, but not timed (nothing was reviewed)."""
        self._requests.results[endpoint, "bad-request"] += 1
