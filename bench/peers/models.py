"""A mixed cluster's GPU models as each system's users configure them (pure: pools and
policy in, objects out).

- Airlock (`models_policy`): a model per GPU product of the pools, told by GPU feature
  discovery's product label as the sandbox writes it, and a queue per team (namespace)
  listing every model in the pools' order, with an even share of each model's GPUs as
  its nominal quota (the first teams get the remainder) and no borrowing or lending
  limit; `fungibility` left at its default, `NextModelFirst`.
- Kueue (`kueue_flavors`), written from the merged Airlock policy so the two mirror each
  other: a ResourceFlavor per model (its `nodeLabels`, on a Topology of the sandbox's
  levels where every pool of the model has NVLink domains, else of hosts alone: a
  Topology's levels must be labels its nodes carry), and per Airlock queue a
  ClusterQueue in one cohort with a quota of each of the queue's models, in the queue's
  order, and the `flavorFungibility` of the queue's fungibility: `NextModelFirst` tries
  the next model within quota before borrowing (`whenCanBorrow: TryNextFlavor`),
  `BorrowFirst` borrows the first model that fits (`MayStopSearch`); both try every
  model before preempting in one (`whenCanPreempt: TryNextFlavor`), as Airlock preempts
  only when the gang fits on no model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bench.peers.manifests import (
    COHORT,
    KUEUE_API,
    KUEUE_LEVELS,
    LOCAL_QUEUE,
    TOPOLOGY,
    cluster_queue_name,
)
from webhook.policy.gpumodels import model_of
from webhook.policy.model import Policy
from webhook.policy.queues import Queue
from webhook.pools import HOST_LABEL, PRODUCT_LABEL, Pool, model_name
from webhook.sandbox.nodes import GPU

# After the trace's grants (95-) and before the timers (99-).
MODELS_FILE = "96-pool-models.yaml"
# The Topology of the models whose nodes have no NVLink domain (nor block) labels.
HOSTS_TOPOLOGY = "gpu-hosts"
_FUNGIBILITY = {"NextModelFirst": "TryNextFlavor", "BorrowFirst": "MayStopSearch"}


def products(pools: Sequence[Pool]) -> dict[str, tuple[str, int]]:
    """Each GPU product of the pools, in their order: its model's name and its GPUs."""
    out: dict[str, tuple[str, int]] = {}
    for pool in pools:
        name, gpus = out.get(pool.product, (model_name(pool.product), 0))
        out[pool.product] = (name, gpus + pool.gpus)
    return out


def shares(total: int, teams: int) -> list[int]:
    """`total` split as evenly as whole numbers allow, the first teams one more."""
    return [total // teams + (1 if i < total % teams else 0) for i in range(teams)]


def models_policy(pools: Sequence[Pool], teams: Sequence[str]) -> dict[str, Any]:
    """The AirlockPolicy document of the pools' models and a queue per team."""
    models = products(pools)
    quotas = {name: shares(gpus, len(teams)) for name, gpus in models.values()}
    return {"apiVersion": "gpu-airlock.io/v1alpha1", "kind": "AirlockPolicy",
            "metadata": {"name": "pool-models"},
            "spec": {"gpuModels": [{"name": name, "nodeLabels": {PRODUCT_LABEL: product}}
                                   for product, (name, _) in models.items()],
                     "queues": [{"name": team, "namespaces": [team],
                                 "models": [{"model": name, "nominal": quotas[name][i]}
                                            for name, _ in models.values()]}
                                for i, team in enumerate(teams)]}}


def _topology(name: str, labels: Sequence[str]) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "Topology", "metadata": {"name": name},
            "spec": {"levels": [{"nodeLabel": label} for label in labels]}}


def _flavor_topologies(policy: Policy, pools: Sequence[Pool]) -> dict[str, str]:
    """Each model's Topology: the sandbox's levels if all its pools have NVLink domains."""
    nvlink: dict[str, bool] = {}
    for pool in pools:
        model = model_of(policy.gpu_models, pool.node_labels())
        if model is not None:
            nvlink[model] = nvlink.get(model, True) and pool.nodes_per_domain is not None
    return {model: TOPOLOGY if linked else HOSTS_TOPOLOGY for model, linked in nvlink.items()}


def _cluster_queue(queue: Queue) -> dict[str, Any]:
    def resource(nominal: int, borrowing: int | None, lending: int | None) -> dict[str, Any]:
        limits = {"borrowingLimit": borrowing, "lendingLimit": lending}
        return {"name": GPU, "nominalQuota": nominal,
                **{k: v for k, v in limits.items() if v is not None}}

    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue_name(queue.name)},
            "spec": {"cohortName": COHORT,
                     "namespaceSelector": {"matchExpressions": [{
                         "key": "kubernetes.io/metadata.name", "operator": "In",
                         "values": list(queue.namespaces)}]},
                     "preemption": {"withinClusterQueue": "LowerPriority",
                                    "reclaimWithinCohort": "Any"},
                     "flavorFungibility": {"whenCanBorrow": _FUNGIBILITY[queue.fungibility],
                                           "whenCanPreempt": "TryNextFlavor"},
                     "resourceGroups": [{"coveredResources": [GPU], "flavors": [
                         {"name": q.model, "resources": [resource(
                             int(q.nominal), None if q.borrowing_limit is None
                             else int(q.borrowing_limit), None if q.lending_limit is None
                             else int(q.lending_limit))]} for q in queue.models]}]}}


def kueue_flavors(policy: Policy, pools: Sequence[Pool]) -> list[dict[str, Any]]:
    """Kueue's objects for the policy's models and queues on the pools, in the order
    they are created (a flavor names its topology, a queue its flavors)."""
    topologies = _flavor_topologies(policy, pools)
    out = [_topology(name, labels) for name, labels in (
        (TOPOLOGY, KUEUE_LEVELS), (HOSTS_TOPOLOGY, (HOST_LABEL,)))
        if name in topologies.values()]
    out += [{"apiVersion": KUEUE_API, "kind": "ResourceFlavor",
             "metadata": {"name": model.name},
             "spec": {"nodeLabels": dict(model.node_labels),
                      "topologyName": topologies[model.name]}}
            for model in policy.gpu_models if model.name in topologies]
    out.append({"apiVersion": KUEUE_API, "kind": "Cohort", "metadata": {"name": COHORT},
                "spec": {}})
    for queue in policy.queues:
        out.append(_cluster_queue(queue))
        out += [{"apiVersion": KUEUE_API, "kind": "LocalQueue",
                 "metadata": {"name": LOCAL_QUEUE, "namespace": ns},
                 "spec": {"clusterQueue": cluster_queue_name(queue.name)}}
                for ns in queue.namespaces]
    return out
