"""The webhook's Prometheus metrics, in a registry of their own so that several servers
(tests) can live in one process."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from webhook.admission.reviews import Outcome

Endpoint = Literal["mutate", "validate"]
Result = Literal["allowed", "denied", "bad-request"]
ENDPOINTS: tuple[Endpoint, ...] = get_args(Endpoint)
RESULTS: tuple[Result, ...] = get_args(Result)
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)


class WebhookMetrics:
    def __init__(self, seconds_to_expiry: Callable[[], float],
                 policy_loaded: Callable[[], float]) -> None:
        self.registry = CollectorRegistry()
        requests = Counter(
            "airlock_admission_requests", "Admission requests by endpoint and result.",
            ("endpoint", "result"), registry=self.registry)
        duration = Histogram(
            "airlock_admission_duration_seconds", "Time to answer an admission request.",
            ("endpoint",), buckets=_LATENCY_BUCKETS, registry=self.registry)
        decisions = Counter(
            "airlock_decisions",
            "Pods by what admission decided when they were created: their class, "
            "unclassified, out-of-scope, or why nothing was decided. One per pod.",
            ("class",), registry=self.registry)
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
        # Every child bound once: a labels() lookup per request is measurable on the hot
        # path, and every series exists from the start (a rate over a missing one is empty).
        self.requests = {(e, r): requests.labels(e, r) for e in ENDPOINTS for r in RESULTS}
        self.duration = {e: duration.labels(e) for e in ENDPOINTS}
        self.decisions = {o: decisions.labels(o) for o in OUTCOMES}
