"""Team queues and their GPU quotas, and how much each queue uses: pure data and
arithmetic, in GPU-equivalents (every accelerator device counts one).

A queue is guaranteed its `nominal`. Beyond it a queue *borrows* from a shared pool, up
to its `borrowing_limit` (None: unlimited). The pool is the capacity no queue is
guaranteed, plus what each queue lends of its nominal: all of it, or `lending_limit`.
The rest of a queue's nominal is protected: no other queue ever borrows it, even idle.
A namespace in no queue is in `default`, which has no guarantee and only borrows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.policy.queues import queue_named

DEFAULT_QUEUE = "default"


@dataclass(frozen=True, slots=True)
class QueueSpec:
    name: str
    # Namespace names or shell-style globs.
    namespaces: tuple[str, ...] = ()
    nominal: GpuEquivalents = 0
    borrowing_limit: GpuEquivalents | None = None
    lending_limit: GpuEquivalents | None = None
    weight: float = 1.0

    @property
    def lendable(self) -> GpuEquivalents:
        return self.nominal if self.lending_limit is None else min(self.nominal,
                                                                   self.lending_limit)

    @property
    def protected(self) -> GpuEquivalents:
        """The part of the nominal only this queue may use."""
        return self.nominal - self.lendable


class Quotas:
    """The queues policy defines; every namespace maps to one of them or to `default`."""

    def __init__(self, queues: Iterable[QueueSpec] = ()) -> None:
        self.queues = tuple(queues)
        self.specs: dict[str, QueueSpec] = {q.name: q for q in self.queues}
        self.specs.setdefault(DEFAULT_QUEUE, QueueSpec(DEFAULT_QUEUE))
        self._by_namespace: dict[str, str] = {}

    def queue_of(self, namespace: str) -> str:
        found = self._by_namespace.get(namespace)
        if found is None:
            found = queue_named(namespace, ((q.name, q.namespaces) for q in self.queues)) \
                or DEFAULT_QUEUE
            self._by_namespace[namespace] = found
        return found

    def spec(self, queue: str) -> QueueSpec:
        return self.specs[queue]


def holding(quotas: Quotas, by_namespace: Mapping[str, GpuEquivalents]
            ) -> dict[str, GpuEquivalents]:
    """GPUs each queue's pods hold now (every queue, 0 when idle), from what the pods of
    each namespace hold (`Occupancy.namespace_gpus`: pods bound, not finished, asking for
    accelerators; room promised to pods not bound yet is counted by the round)."""
    used: dict[str, GpuEquivalents] = dict.fromkeys(quotas.specs, 0)
    for namespace, gpus in by_namespace.items():
        queue = quotas.queue_of(namespace)
        used[queue] = used.get(queue, 0) + gpus
    return used


class Ledger:
    """Usage per queue for one round, kept current as the round admits and preempts.

    `used` changes only through `add`. What `admissible` answered is kept until then:
    thousands of waiting units of a few queues ask it alike, twice each, every round."""

    def __init__(self, quotas: Quotas, by_namespace: Mapping[str, GpuEquivalents],
                 capacity: GpuEquivalents) -> None:
        self.quotas = quotas
        self.used = holding(quotas, by_namespace)
        guaranteed = sum(q.nominal for q in quotas.specs.values())
        self.pool = max(capacity - guaranteed, 0) + sum(q.lendable
                                                        for q in quotas.specs.values())
        self._answers: dict[tuple[str, GpuEquivalents, bool], str | None] = {}

    def add(self, queue: str, amount: GpuEquivalents) -> None:
        self.used[queue] = self.used.get(queue, 0) + amount
        self._answers.clear()

    def borrowed(self, queue: str) -> GpuEquivalents:
        return max(self.used.get(queue, 0) - self.quotas.spec(queue).nominal, 0)

    def _from_pool(self, queue: str, used: GpuEquivalents) -> GpuEquivalents:
        return max(used - self.quotas.spec(queue).protected, 0)

    def pool_used(self) -> GpuEquivalents:
        return sum(self._from_pool(q, u) for q, u in self.used.items())

    def admissible(self, queue: str, amount: GpuEquivalents,
                   released: Mapping[str, GpuEquivalents] | None = None,
                   pooled: bool = True) -> str | None:
        """None when `amount` more GPUs fit the queue's quota (after `released` GPUs per
        queue are freed); else why not. Without `pooled`, borrowing is bounded by the
        queue's own limit alone, not by what today's nodes leave idle: what a grown
        cluster would admit."""
        if released:
            return self._admissible(queue, amount, released, pooled)
        key = (queue, amount, pooled)
        try:
            return self._answers[key]
        except KeyError:
            found = self._answers[key] = self._admissible(queue, amount, {}, pooled)
            return found

    def _admissible(self, queue: str, amount: GpuEquivalents,
                    released: Mapping[str, GpuEquivalents], pooled: bool) -> str | None:
        spec = self.quotas.spec(queue)
        used = self.used.get(queue, 0) - released.get(queue, 0)
        after = used + amount
        if after <= spec.nominal:
            return None
        over = after - spec.nominal
        if spec.borrowing_limit is not None and over > spec.borrowing_limit:
            return (f"queue {queue} would use {after} GPUs: nominal {spec.nominal}, "
                    f"borrowing limit {spec.borrowing_limit}")
        if not pooled:
            return None
        pool_used = sum(self._from_pool(q, u - released.get(q, 0))
                        for q, u in self.used.items() if q != queue)
        pool_used += self._from_pool(queue, after)
        if pool_used > self.pool:
            return (f"queue {queue} would borrow {over} GPUs beyond its nominal "
                    f"{spec.nominal}, and the idle capacity other queues lend is taken")
        return None
