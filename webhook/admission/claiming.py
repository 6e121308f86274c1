"""A pod's DRA claims, looked up: what its ResourceClaims and ResourceClaimTemplates ask
for, added to what the pod requests, so that a pod claiming GPUs through Dynamic Resource
Allocation is classified, tolerated, gated and recorded like one that requests an extended
resource.

The claims come looked up (`Claims`): the webhook reads them from its watch-fed cache,
`explain` from the files it is given. A claim that is not there cannot be judged: the pod
is refused with a message saying so, unless it is out of Airlock's scope anyway. The
controllers that make pods (ReplicaSet, Job, the operators) retry, by then the cache has
seen the template, which they create first; see docs/dra.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.devices.claims import Ask, ClaimKind, asks_of, claim_spec, demand, named
from webhook.pods import PodView
from webhook.policy.gpumodels import claimed_models, selection_problem
from webhook.policy.model import Policy

# A claim or template, by kind and name, in the pod's namespace.
ClaimKey = tuple[ClaimKind, str]
Claims = Mapping[ClaimKey, tuple[Ask, ...]]


def keys_of(obj: Any) -> list[ClaimKey]:
    """The claims a pod object names, read leniently before it is parsed: what to look up."""
    return named(obj.get("spec")) if type(obj) is dict else []


def entry(obj: Mapping[str, Any], kind: ClaimKind
          ) -> tuple[str, ClaimKey, tuple[Ask, ...]] | None:
    """A ResourceClaim or ResourceClaimTemplate as claims are looked up in: its namespace,
    key and asks; None for what has no name. (Items of a list carry no `kind`: the
    caller knows what it listed.)"""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    if not isinstance(name, str) or not isinstance(meta, Mapping):
        return None
    spec = claim_spec(obj, template=kind == "ResourceClaimTemplate")
    return str(meta.get("namespace") or "default"), (kind, name), asks_of(spec)


def kind_of(obj: Mapping[str, Any]) -> ClaimKind | None:
    """The claim kind of an object as written in a file, if it is one."""
    kind = obj.get("kind")
    api = obj.get("apiVersion")
    if isinstance(api, str) and api.startswith("resource.k8s.io/"):
        if kind == "ResourceClaim":
            return "ResourceClaim"
        if kind == "ResourceClaimTemplate":
            return "ResourceClaimTemplate"
    return None


def claimed(pod: PodView, claims: Claims, policy: Policy) -> PodView | str:
    """The pod, asking also for what its claims ask of the DeviceClasses policy maps; or
    why that cannot be known."""
    asks: list[Ask] = []
    for i, c in enumerate(pod.claims):
        key: ClaimKey | None = (("ResourceClaim", c.claim) if c.claim else
                                ("ResourceClaimTemplate", c.template) if c.template else None)
        if key is None:
            continue
        found = claims.get(key)
        if found is None:
            return (f"spec.resourceClaims[{i}] names {key[0]} {pod.namespace}/{key[1]}, which "
                    f"Airlock has not seen (yet), so it cannot tell whether the pod claims "
                    f"GPUs; create the {key[0]} before the pod (a controller that makes "
                    f"pods retries), or, for `airlock explain`, give it in the same files")
        asks.extend(found)
    # How many devices `All` comes to depends on the node; here only whether the pod asks
    # for GPUs at all matters.
    found, kinds = tuple(asks), policy.device_kinds
    models = claimed_models(policy.gpu_models, found, kinds)
    return pod.claimed(demand(found, kinds, lambda _: 1), models,
                       selection_problem(policy.gpu_models, found, kinds) if models == () else None)
