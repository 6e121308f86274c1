"""GPU models for the pods the controller never places: a pod Airlock does not gate (a
single pod of a class that does not queue, inference by default, or one another system
holds) goes straight to kube-scheduler, so the models it may get are written into its
required node affinity at admission. A gated pod needs none: the controller picks one
model for its gang and pins it there at ungate.

Pure: the pod and the policy in, the affinity out (or None: no change). Idempotent: a pod
whose every required term already keeps it to one of its models is left as it is."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.pods import PodView
from webhook.policy.gpumodels import GpuModel, models_for, named_models
from webhook.policy.model import Policy
from webhook.policy.queues import queue_named

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
# Terms (and their expressions) the pod has times the models it may get: past these, a
# hostile pod's thousands of terms would make a patch of tens of thousands, and checking
# them would take the review's budget; the pod is left as it is, with a warning.
MAX_TERMS = 64
MAX_EXPRESSIONS = 1024


def models_of(pod: PodView, policy: Policy) -> tuple[str, ...] | None:
    """The GPU models the pod may get, in the order its queue tries them; None where
    policy names no models."""
    if not policy.gpu_models:
        return None
    return models_for(policy.gpu_models, _order(pod, policy), _named(pod), pod.node_selector)


def _named(pod: PodView) -> tuple[str, ...]:
    """The models the pod names, by annotation, kept to those its DRA claims select."""
    named = named_models(pod.annotations.get(GPU_MODELS_ANNOTATION))
    if pod.claim_models is None:
        return named
    return tuple(m for m in named if m in pod.claim_models) if named else pod.claim_models


def _order(pod: PodView, policy: Policy) -> list[str] | None:
    """The models the pod's queue lists, in its order; None: it lists none (any model)."""
    name = queue_named(pod.namespace, ((q.name, q.namespaces) for q in policy.queues))
    queue = next((q for q in policy.queues if q.name == name), None)
    return [m.model for m in queue.models] if queue is not None and queue.models else None


def _expressions(model: GpuModel) -> list[dict[str, Any]]:
    return [{"key": k, "operator": "In", "values": [v]}
            for k, v in sorted(model.node_labels.items())]


def _exprs(term: Mapping[str, Any]) -> list[Any]:
    # Any other shape is the apiserver's to refuse, after admission.
    exprs = term.get("matchExpressions")
    return exprs if isinstance(exprs, list) else []


def _keeps_to(term: Mapping[str, Any], models: Sequence[GpuModel]) -> bool:
    have = _exprs(term)
    return any(all(e in have for e in _expressions(m)) for m in models)


def model_affinity(pod: PodView, policy: Policy, affinity: Mapping[str, Any]
                   ) -> tuple[dict[str, Any] | None, str | None]:
    """`affinity` (the pod's, as admission leaves it so far) with every required node term
    kept to the nodes of one of the models the pod may get; or None and why not (None,
    None: it needs no change)."""
    if not policy.gpu_models or pod.claim_models is not None:
        # Where its claims select models, the scheduler's DRA allocator keeps it to them.
        return None, None
    # Once per pod: a queue that lists no models, and a pod that names none, may use every
    # model and then nodes of no model, which no affinity needs to say.
    order = _order(pod, policy)
    named = named_models(pod.annotations.get(GPU_MODELS_ANNOTATION))
    if order is None and not named:
        return None, None
    by_name = policy.derived("gpu-models-by-name",
                             lambda p: {m.name: m for m in p.gpu_models})
    models = [by_name[n] for n in models_for(policy.gpu_models, order, named,
                                              pod.node_selector)]
    if not models:
        return None, ("it may get no GPU model (those it names are not its queue's); "
                      "kube-scheduler may place it on any")
    if any(not m.node_labels for m in models):
        return None, ("a model it may get is told apart by DRA device attributes alone, "
                      "which node affinity cannot select; kube-scheduler may place it on "
                      "any model")
    node = affinity.get("nodeAffinity")
    node = node if isinstance(node, Mapping) else {}
    required = node.get(_REQUIRED)
    required = required if isinstance(required, Mapping) else {}
    terms = required.get("nodeSelectorTerms")
    terms = [t if isinstance(t, Mapping) else {} for t in terms] \
        if isinstance(terms, list) and terms else [{}]
    expressions = sum(len(_exprs(t)) for t in terms)
    if len(terms) > MAX_TERMS or expressions > MAX_EXPRESSIONS:
        return None, (f"it has more than {MAX_TERMS} node affinity terms or "
                      f"{MAX_EXPRESSIONS} expressions in them; kube-scheduler may place it "
                      f"on any model")
    if all(_keeps_to(t, models) for t in terms):
        return None, None
    if len(terms) * len(models) > MAX_TERMS or expressions * len(models) > MAX_EXPRESSIONS:
        return None, (f"its {len(terms)} node affinity terms times the {len(models)} GPU "
                      f"models it may get are more than {MAX_TERMS} (or their expressions "
                      f"more than {MAX_EXPRESSIONS}); kube-scheduler may place it on any "
                      f"model")
    kept = [{**t, "matchExpressions": [*_exprs(t), *_expressions(m)]}
            for t in terms for m in models]
    return {**affinity, "nodeAffinity": {
        **node, _REQUIRED: {**required, "nodeSelectorTerms": kept}}}, None
