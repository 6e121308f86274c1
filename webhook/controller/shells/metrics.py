"""The controller's Prometheus metrics, in a registry of its own."""

from __future__ import annotations

import collections
from collections.abc import Iterable, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from webhook.controller.core.actions import Victim, lost_of
from webhook.controller.core.queues.accounting import QueueSample
from webhook.controller.core.queues.modelquotas import ModelUsage
from webhook.controller.core.reasons import WAIT_REASONS, WaitReason


class ControllerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._decisions()
        self._queues()
        self._upkeep()

    def _decisions(self) -> None:
        """What the rounds decided, and what it cost."""
        self.gangs_waiting = Gauge("airlock_gangs_waiting",
                                   "Gangs (and queued single pods) waiting to be admitted, "
                                   "by why (docs/controller.md, wait reasons).", ["reason"],
                                   registry=self.registry)
        self.admitted = Counter("airlock_gangs_admitted", "Gangs admitted.",
                                registry=self.registry)
        self.time_to_admit = Histogram(
            "airlock_gang_time_to_admit_seconds",
            "From a gang's first member's creation to its admission.",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600),
            registry=self.registry)
        self.fit_seconds = Histogram(
            "airlock_fit_duration_seconds", "Time to decide one round (snapshot and fit).",
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1),
            registry=self.registry)
        self.prediction_error = Histogram(
            "airlock_prediction_error_seconds",
            "How far a gang's admission was from its first known predicted start "
            "(docs/predictions.md).",
            buckets=(30, 60, 120, 300, 600, 1800, 3600, 7200, 14400, 43200),
            registry=self.registry)
        self.forecast_seconds = Histogram(
            "airlock_forecast_duration_seconds",
            "Time to play the last round forward for every waiting gang's predicted start.",
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=self.registry)
        self.preemptions = Counter(
            "airlock_preemptions", "Victims evicted (a whole gang or a single pod counts "
            "one), by cause: priority, reclaim, or backfill (a backfill that overran).",
            ["cause"], registry=self.registry)
        self.preempted_gpu_hours = Counter(
            "airlock_preempted_gpu_hours",
            "Work lost to preemption, in GPU-hours since each victim's start or checkpoint "
            "(an elastic gang's pod above its minimum: its whole gang's, once).",
            ["cause"], registry=self.registry)

    def _queues(self) -> None:
        """Each queue's quota, use and share, also per GPU model."""
        self.queue_used = Gauge("airlock_queue_gpus_used",
                                "GPU-equivalents a queue's pods hold.", ["queue"],
                                registry=self.registry)
        self.queue_nominal = Gauge("airlock_queue_gpus_nominal",
                                   "GPU-equivalents guaranteed to a queue.", ["queue"],
                                   registry=self.registry)
        self.queue_borrowed = Gauge("airlock_queue_gpus_borrowed",
                                    "GPU-equivalents a queue uses beyond its nominal.",
                                    ["queue"], registry=self.registry)
        self.model_used = Gauge("airlock_queue_model_gpus_used",
                                "GPUs of one model a queue's pods hold.", ["queue", "model"],
                                registry=self.registry)
        self.model_nominal = Gauge("airlock_queue_model_gpus_nominal",
                                   "GPUs of one model guaranteed to a queue.",
                                   ["queue", "model"], registry=self.registry)
        self.model_borrowed = Gauge("airlock_queue_model_gpus_borrowed",
                                    "GPUs of one model a queue uses beyond its nominal of it.",
                                    ["queue", "model"], registry=self.registry)
        self.queue_share = Gauge(
            "airlock_queue_fair_share",
            "A queue's decayed usage (GPU-seconds) divided by its weight; lower goes first.",
            ["queue"], registry=self.registry)

    def _upkeep(self) -> None:
        """What the controller mended, passed over or asked an autoscaler for."""
        self.requeued = Counter(
            "airlock_gangs_requeued", "Running gangs short of members past the grace "
            "period, whose rest was evicted to start again whole.", registry=self.registry)
        self.replanned = Counter(
            "airlock_pods_replanned", "Pods let go pinned to a node that could no longer "
            "take them before they were bound, evicted to be made again and placed "
            "afresh.", registry=self.registry)
        self.records_ignored = Gauge(
            "airlock_records_ignored",
            "Records the last round did not act on: written on a pod by someone other than "
            "the controller, or recorded victims the checks now keep. Each has a "
            "RecordIgnored event.", registry=self.registry)

        self.rounds_failed = Counter(
            "airlock_rounds_failed", "Rounds that raised and decided nothing; rounds "
            "failing for a minute on end fail the liveness probe (/healthz).",
            registry=self.registry)
        self.pods_unreadable = Gauge(
            "airlock_pods_unreadable", "Pods the controller's watch could not read since it "
            "started: kept by name as Invalid, never decided for.", registry=self.registry)
        self.objects_passed_over = Gauge(
            "airlock_watch_objects_passed_over", "Objects (of any kind watched) the watches "
            "could not take since the process started: passed over, the watch going on.",
            registry=self.registry)

        self.capacity_requests = Counter(
            "airlock_capacity_requests", "Capacity requests (placeholders for a gang), by "
            "outcome: requested, provisioned (the gang was admitted), withdrawn (it stopped "
            "asking), expired (no room came in time).", ["outcome"], registry=self.registry)
        self.placeholders = Gauge(
            "airlock_placeholders", "Placeholder pods there are, asking an autoscaler for "
            "room.", registry=self.registry)

    def waiting(self, reasons: Iterable[WaitReason]) -> None:
        """How many gangs wait, by why: every reason, so one that no gang has any more
        reads 0 rather than what it last was."""
        counts = collections.Counter(reasons)
        for reason in WAIT_REASONS:
            self.gangs_waiting.labels(reason).set(counts[reason])

    def queues(self, samples: Iterable[QueueSample]) -> None:
        for q in samples:
            self.queue_used.labels(q.name).set(float(q.used))
            self.queue_nominal.labels(q.name).set(float(q.nominal))
            self.queue_borrowed.labels(q.name).set(float(q.borrowed))
            self.queue_share.labels(q.name).set(q.share)

    def models(self, usage: Iterable[ModelUsage]) -> None:
        for m in usage:
            self.model_used.labels(m.queue, m.model).set(m.used)
            self.model_nominal.labels(m.queue, m.model).set(m.nominal)
            self.model_borrowed.labels(m.queue, m.model).set(m.borrowed)

    def preempted(self, victims: Sequence[Victim]) -> None:
        for cause in {v.cause for v in victims}:
            by_cause = [v for v in victims if v.cause == cause]
            self.preemptions.labels(cause).inc(len(by_cause))
            self.preempted_gpu_hours.labels(cause).inc(lost_of(by_cause) / 3600)
