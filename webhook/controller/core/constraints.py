"""Where a pod may go: the nodes it selects, the taints it tolerates, the devices a node
must have for it, the GPU models it may run on."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.accelerators import extended
from webhook.controller.core.resources import Resources, requested
from webhook.keys import GPU_MODELS_ANNOTATION
from webhook.policy.gpumodels import named_models

Signature = tuple[Any, ...]
_NONE: Mapping[str, str] = {}
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@functools.lru_cache(maxsize=256)
def _extended(names: tuple[str, ...]) -> tuple[str, ...]:
    # One shared tuple per distinct set of requests: gangs' pods mostly ask alike.
    return tuple(sorted(k for k in names if extended(k)))


@functools.lru_cache(maxsize=1024)
def _interned(sig: Signature) -> Signature:
    # One tuple for every pod alike: most pods of a cluster share a handful.
    return sig


@dataclass(frozen=True, slots=True)
class Constraints:
    node_selector: Mapping[str, str]
    # The terms of its required node affinity, one of which a node must match; None
    # where it requires none.
    affinity_terms: tuple[Mapping[str, Any], ...] | None
    tolerations: tuple[Mapping[str, Any], ...]
    # The extended resources the pod requests: a node without one of them is no place for
    # it, however many other accelerators it has free.
    devices: tuple[str, ...]
    # How much of `spec.affinity.nodeAffinity` the pod has where it has no required terms
    # (0: no affinity, 1: affinity, 2: its nodeAffinity too): where the ungate patch adds
    # the requirement that fences it off room reserved for others.
    affinity_depth: int = 0
    # The GPU models it names (`gpu-airlock.io/gpu-models`), most wanted first.
    gpu_models: tuple[str, ...] = ()
    # The models its DRA claims' selectors allow (`productName`), most wanted first;
    # None: they name none; (): no model of the policy.
    claim_models: tuple[str, ...] | None = None
    # The one node its required node affinity allows by name (`matchFields`
    # `metadata.name In [node]` in every term that matches anything): how Airlock pins a
    # pod to its planned node at ungate, and how a pod may name its node itself.
    pinned: str | None = None
    # Whether its node affinity has preferred terms already: the ungate patch adds
    # Airlock's preference for the planned node to them, not in their place.
    preferring: bool = False
    # Pods with the same signature may use the same nodes. A field, not a property: rounds
    # group every pod they weigh by it.
    signature: Signature = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "signature", _interned((
            tuple(sorted(self.node_selector.items())), repr(self.affinity_terms),
            repr(self.tolerations), self.devices)))

    @classmethod
    def read(cls, spec: Mapping[str, Any], annotations: Mapping[str, str],
             requests: Resources) -> Constraints:
        """The constraints in a pod's spec and annotations, for a pod that asks for
        `requests`."""
        affinity = spec.get("affinity")
        node_affinity = (affinity or {}).get("nodeAffinity")
        required = (node_affinity or {}).get(_REQUIRED)
        terms = tuple(required.get("nodeSelectorTerms") or ()) if required else None
        return cls(node_selector=spec.get("nodeSelector") or _NONE,
                   affinity_terms=terms,
                   tolerations=tuple(spec.get("tolerations") or ()),
                   devices=_extended(requested(requests)),
                   affinity_depth=0 if required is not None else
                   _depth(affinity, node_affinity),
                   gpu_models=named_models(annotations.get(GPU_MODELS_ANNOTATION)),
                   pinned=_pinned(terms),
                   preferring=bool((node_affinity or {}).get(_PREFERRED)))

    @property
    def models_named(self) -> tuple[str, ...] | None:
        """The models it names either way, most wanted first: () where it names none;
        None where the two ways leave it none (`claim_models` says which)."""
        if self.claim_models is None:
            return self.gpu_models
        if not self.gpu_models:
            return self.claim_models or None
        return tuple(m for m in self.gpu_models if m in self.claim_models) or None

    def requesting(self, requests: Resources) -> Constraints:
        """The same constraints on a pod that now asks for `requests`."""
        return dataclasses.replace(self, devices=_extended(requested(requests)))


def _depth(affinity: Any, node_affinity: Any) -> int:
    return 2 if node_affinity is not None else 1 if affinity is not None else 0


def _pinned(terms: tuple[Mapping[str, Any], ...] | None) -> str | None:
    """The one node `terms` allow by name, if they allow only one."""
    named: set[str] = set()
    for term in terms or ():
        if not term.get("matchExpressions") and not term.get("matchFields"):
            continue  # matches no node
        here = {str(values[0]) for f in term.get("matchFields") or ()
                if f.get("key") == "metadata.name" and f.get("operator") == "In"
                and isinstance(values := f.get("values"), list) and len(values) == 1}
        if len(here) != 1:
            return None
        named |= here
    return next(iter(named)) if len(named) == 1 else None


# What the controller keeps of where a pod it does not decide may go: nothing, since such
# a pod only counts for capacity. One value for all of them, most of a large cluster.
UNCONSTRAINED = Constraints(node_selector=_NONE, affinity_terms=None, tolerations=(),
                            devices=())
