"""Where a run's pods landed, checked against the GPU models each may use: read from the
binds the simulation made (`Simulation.on_bind`), not from the controller's plan, so a
pod the scheduler put on the wrong model, or a gang split over two, is counted whatever
the plan said.

- a gang straddles models when the pods of one attempt of it (a run, and the pods made
  again after a preemption are another) are bound to nodes of more than one model;
- a pod is off its models when it is bound to a node of a model it may not use: those it
  names (`gpuModels`), within its queue's, and those its nodeSelector allows, as
  `airlock explain` lists them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from webhook.policy.gpumodels import model_of, models_for
from webhook.policy.model import Policy
from webhook.policy.queues import queue_named
from webhook.simulation.traces import Job


@dataclass(slots=True)
class Landings:
    """`labels`: every node's labels, by node name."""

    policy: Policy
    labels: Mapping[str, Mapping[str, str]]
    binds: int = 0
    # The models each gang's attempt was bound to: (namespace, job, attempt) -> models.
    gangs: dict[tuple[str, str, int], set[str | None]] = field(default_factory=dict)
    # Each pod bound off its models: (namespace/pod, the node's model, the allowed ones).
    off_models: list[tuple[str, str | None, tuple[str | None, ...]]] = field(
        default_factory=list)
    _allowed: dict[tuple[str, str], tuple[str | None, ...]] = field(default_factory=dict)

    def bound(self, job: Job, attempt: int, pod: str, node: str) -> None:
        self.binds += 1
        model = model_of(self.policy.gpu_models, self.labels[node])
        if job.pods > 1:
            self.gangs.setdefault((job.namespace, job.name, attempt), set()).add(model)
        allowed = self.allowed(job)
        if model not in allowed:
            self.off_models.append((f"{job.namespace}/{pod}", model, allowed))

    def allowed(self, job: Job) -> tuple[str | None, ...]:
        """The models the job's pods may run on; where neither its queue nor the job
        names any, every model and the nodes of none (None)."""
        found = self._allowed.get(job.key)
        if found is None:
            queues = {q.name: q for q in self.policy.queues}
            queue = queues.get(queue_named(job.namespace, (
                (q.name, q.namespaces) for q in self.policy.queues)) or "")
            order = [m.model for m in queue.models] if queue and queue.models else None
            unnamed = (None,) if order is None and not job.gpu_models else ()
            found = self._allowed[job.key] = (*models_for(
                self.policy.gpu_models, order, job.gpu_models, dict(job.node_selector)),
                *unnamed)
        return found

    @property
    def straddling(self) -> list[tuple[str, str, int]]:
        """The gangs' attempts bound to more than one model."""
        return sorted(key for key, models in self.gangs.items() if len(models) > 1)
