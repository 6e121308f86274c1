"""Quotas per GPU model: the models each queue may run on, in the order it tries them,
whether it borrows its first model before it moves on, and a ledger per model that
charges each pod to the model of the node it runs on. Policy: `spec.gpuModels` and
`spec.queues[].models` (docs/gpu-models.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.models import Models
from webhook.controller.core.cluster.tracking import Tracked
from webhook.controller.core.queues.quotas import Ledger, QueueSpec, Quotas, holding
from webhook.policy.model import Policy

# The nodes of no model, where a queue with no quotas per model may go last.
NO_MODEL = None
Model = str | None


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """A queue's quota and use of one GPU model: for metrics and `airlock status`."""

    queue: str
    model: str
    nominal: float
    used: float
    borrowed: float


@dataclass(frozen=True, slots=True)
class ModelQuotas:
    # Queue -> the models it tries, in order; a queue absent tries every model, then
    # nodes of none.
    orders: Mapping[str, tuple[Model, ...]]
    anywhere: tuple[Model, ...]
    borrow_first: frozenset[str]
    # Model -> every queue's quota of it (0 and no borrowing limit where a queue names
    # no quota of the model).
    quotas: Mapping[str, Quotas]

    def order(self, queue: str, named: Sequence[str] = ()) -> tuple[Model, ...]:
        """The models a unit of `queue` may take, in order: those its pods `named`, in
        their order, that the queue allows; else the queue's."""
        allowed = self.orders.get(queue, self.anywhere)
        return tuple(m for m in named if m in allowed) if named else allowed


def model_quotas_of(policy: Policy) -> ModelQuotas | None:
    """None where policy names no GPU model: the cluster is one pool."""
    if not policy.gpu_models:
        return None
    names = tuple(m.name for m in policy.gpu_models)
    quotas = {}
    for model in names:
        specs = []
        for q in policy.queues:
            mine = next((m for m in q.models if m.model == model), None)
            specs.append(QueueSpec(q.name, q.namespaces) if mine is None else QueueSpec(
                q.name, q.namespaces, mine.nominal, mine.borrowing_limit, mine.lending_limit))
        quotas[model] = Quotas(specs)
    return ModelQuotas({q.name: tuple(m.model for m in q.models) for q in policy.queues
                        if q.models}, (*names, NO_MODEL),
                       frozenset(q.name for q in policy.queues if q.fungibility == "BorrowFirst"),
                       quotas)


def model_usage(policy: Policy, cluster: Tracked) -> list[ModelUsage]:
    """Each queue's quota and use of each model it has a quota of or uses."""
    settings = model_quotas_of(policy)
    if settings is None:
        return []
    cluster.sort_models(policy.gpu_models)
    found = []
    for model, quotas in settings.quotas.items():
        used = holding(quotas, cluster.models.held.get(model, {}))
        for name, spec in sorted(quotas.specs.items()):
            if spec.nominal or used.get(name, 0):
                held = float(used.get(name, 0))
                found.append(ModelUsage(name, model, float(spec.nominal), held,
                                        max(held - spec.nominal, 0.0)))
    return found


class ModelLedgers:
    """Usage per queue and model for one round, kept current as the round admits."""

    def __init__(self, settings: ModelQuotas, models: Models) -> None:
        self.settings = settings
        self._models = models
        self._ledgers: dict[str, Ledger] = {}

    def ledger(self, model: str) -> Ledger:
        """The queues' usage of `model` and their quotas of it."""
        found = self._ledgers.get(model)
        if found is None:
            found = self._ledgers[model] = Ledger(self.settings.quotas[model],
                                                  self._models.held.get(model, {}),
                                                  self._models.total.get(model, 0))
        return found

    def within_nominal(self, queue: str, model: Model, amount: GpuEquivalents) -> bool:
        if model is NO_MODEL:
            return True
        ledger = self.ledger(model)
        return ledger.used.get(queue, 0) + amount <= ledger.quotas.spec(queue).nominal

    def admissible(self, queue: str, model: Model, amount: GpuEquivalents) -> str | None:
        """None when `amount` more GPUs of `model` fit the queue's quota of it."""
        if model is NO_MODEL:
            return None
        why = self.ledger(model).admissible(queue, amount)
        return None if why is None else f"{model}: {why}"

    def add(self, queue: str, model: Model, amount: GpuEquivalents) -> None:
        if model is not NO_MODEL:
            self.ledger(model).add(queue, amount)
