"""Which resources are accelerators, and how many GPU-equivalents a resource map holds:
the one answer the admission side and the controller share.

- The policy's `scope.accelerators` names them. Both halves read the same policy files.
- The webhook records on each pod it mutates the accelerators that pod requests
  (`ACCELERATORS_ANNOTATION`), so a gang admitted under an older policy keeps being
  counted after the policy drops a name.
- Before either, the apiserver's pre-filter (the webhooks' matchConditions in
  deploy/base/webhook-configurations.yaml) decides which pods reach the webhook at all.
  It passes every extended resource, so any name a policy may list gets through without
  redeploying the configuration. `MATCH_CONDITIONS` is its text; `extended` is the same
  test in Python, which policy validation applies to every listed accelerator.

Counting: one device of an accelerator is one GPU-equivalent, except the slices the
policy offers (MIG profiles, shared GPUs: `spec.gpuSlices`), which count their share of a
GPU, so seven `nvidia.com/mig-1g.10gb` are one GPU. Counts are exact (`Fraction` where a
share is involved, `int` otherwise, so whole-GPU clusters pay nothing for it); callers hold
`GpuEquivalents` and never look inside.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Final

from webhook.keys import ACCELERATORS_ANNOTATION, CLASS_LABEL, GANG_LABEL, GATE

__all__ = ["ACCELERATORS_ANNOTATION", "MATCH_CONDITIONS", "Accelerators", "GpuEquivalents",
           "extended", "name_problem", "recorded", "to_record"]

# Exact: an int while only whole devices are counted, a Fraction once a share is.
GpuEquivalents = int | Fraction


@dataclass(frozen=True, slots=True)
class Accelerators:
    """A set of accelerator resource names, and what they count: one GPU-equivalent a
    device, or the device's share of a GPU for the names in `shares`."""

    names: frozenset[str]
    shares: Mapping[str, Fraction] = field(default_factory=dict, hash=False, compare=True)

    @classmethod
    def of(cls, names: Iterable[str], shares: Mapping[str, Fraction] | None = None
           ) -> Accelerators:
        """`shares`: resource -> the share of a GPU one device is (in (0, 1]); each is an
        accelerator too."""
        given = shares or {}
        return cls(frozenset(names).union(given), {k: v for k, v in given.items() if v != 1})

    def including(self, more: Iterable[str]) -> Accelerators:
        """These and `more` (names recorded on pods admitted under another policy)."""
        names = self.names.union(more)
        return self if len(names) == len(self.names) else Accelerators(names, self.shares)

    def count(self, resources: Mapping[str, int]) -> GpuEquivalents:
        """GPU-equivalents in a map of resource -> whole units (a pod's requests, a
        node's free capacity). Everything else in the map is ignored."""
        names, shares = self.names, self.shares
        total: GpuEquivalents = 0
        if not shares:
            # A plain loop: this runs for every pod and node of every round.
            for k, v in resources.items():
                if k in names:
                    total += v
            return total
        for k, v in resources.items():
            if k in names:
                share = shares.get(k)
                total += v if share is None else v * share
        return total

    def joins(self, template: Any) -> bool:
        """Whether the pods a pod template makes join their gang: the webhook gates a pod
        that requests one of these accelerators or carries an explicit class, and leaves
        others alone (a Ray head or an MPI launcher without GPUs starts at once), so an
        owner's gang size counts only the replicas whose template joins. The same test as
        classification's scope (a unit test keeps the two in step)."""
        if not isinstance(template, Mapping):
            return False
        meta, spec = template.get("metadata"), template.get("spec")
        labels = meta.get("labels") if isinstance(meta, Mapping) else None
        if isinstance(labels, Mapping) and CLASS_LABEL in labels:
            return True
        if not isinstance(spec, Mapping):
            return False
        names = self.names
        for field_name in ("containers", "initContainers"):
            containers = spec.get(field_name)
            for c in containers if isinstance(containers, list) else ():
                resources = c.get("resources") if isinstance(c, Mapping) else None
                if not isinstance(resources, Mapping):
                    continue
                for kind in ("requests", "limits"):
                    amounts = resources.get(kind)
                    if isinstance(amounts, Mapping) and not names.isdisjoint(amounts):
                        return True
        return False


# --- what the webhook records on a pod ------------------------------------------------

def to_record(accelerators: Iterable[str], resources: Collection[str]) -> str:
    """The annotation value for a pod that requests `resources`: the accelerators among
    them, sorted, comma-separated; "" when there are none."""
    return ",".join(sorted(a for a in accelerators if a in resources))


@functools.lru_cache(maxsize=64)
def recorded(value: str) -> frozenset[str]:
    """The names an annotation value records. Only extended resources: a hand-written
    value must not make the controller count CPU or memory as GPUs. Cached, because the
    pods of a cluster carry a handful of distinct values."""
    return frozenset(n for n in (part.strip() for part in value.split(",")) if extended(n))


# --- the apiserver's pre-filter -------------------------------------------------------

def extended(resource: str) -> bool:
    """Kubernetes' test for an extended resource: a name with a domain that is not
    kubernetes.io's (cpu, memory and hugepages-* have none), and not a quota name."""
    return "/" in resource and "kubernetes.io/" not in resource \
        and not resource.startswith("requests.")


# `extended` in CEL, over a resource name `r`; keep the two in step (tests check both
# against the same names, the e2e tests check the CEL on the apiserver).
_EXTENDED_CEL = "r.contains('/') && !r.contains('kubernetes.io/') && !r.startsWith('requests.')"


def _containers_request(field: str) -> str:
    return (f"{field}.exists(c, has(c.resources) && "
            f"((has(c.resources.limits) && c.resources.limits.exists(r, {_EXTENDED_CEL})) || "
            f"(has(c.resources.requests) && c.resources.requests.exists(r, {_EXTENDED_CEL}))))")


_REQUESTS_EXTENDED = (f"{_containers_request('object.spec.containers')} || "
                      f"(has(object.spec.initContainers) && "
                      f"{_containers_request('object.spec.initContainers')})")
_EXPLICIT_CLASS = f"(has(object.metadata.labels) && '{CLASS_LABEL}' in object.metadata.labels)"
# A pod may claim its GPUs through DRA: which claims are GPUs the webhook decides.
_CLAIMS = "(has(object.spec.resourceClaims) && size(object.spec.resourceClaims) > 0)"

# A claim (or a template's) with two requests or more: only such a claim can ask for
# devices to keep together.
_SEVERAL_REQUESTS = (
    "(has(object.spec.devices) && has(object.spec.devices.requests) && "
    "size(object.spec.devices.requests) > 1) || "
    "(has(object.spec.spec) && has(object.spec.spec.devices) && "
    "has(object.spec.spec.devices.requests) && size(object.spec.spec.devices.requests) > 1)")

# The matchConditions of each webhook in deploy/base/webhook-configurations.yaml, exactly.
MATCH_CONDITIONS: Final[dict[str, list[dict[str, str]]]] = {
    "mutate.gpu-airlock.io": [{
        "name": "extended-resource-claims-or-explicit-class",
        "expression": f"{_EXPLICIT_CLASS} || {_CLAIMS} || {_REQUESTS_EXTENDED}",
    }],
    "claims.gpu-airlock.io": [{
        "name": "several-requests",
        "expression": _SEVERAL_REQUESTS,
    }],
    "validate.gpu-airlock.io": [{
        "name": "extended-resource-claims-explicit-class-or-airlock-gated",
        "expression": (
            f"{_EXPLICIT_CLASS} || {_CLAIMS} || "
            f"(has(object.metadata.labels) && '{GANG_LABEL}' in object.metadata.labels) || "
            f"(oldObject != null && has(oldObject.spec.schedulingGates) && "
            f"oldObject.spec.schedulingGates.exists(g, g.name == '{GATE}')) || "
            f"{_REQUESTS_EXTENDED}"),
    }],
}

# A qualified resource name: a DNS-subdomain prefix, `/`, then a name part.
_QUALIFIED = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*"
                        r"[A-Za-z0-9])?$")


def name_problem(resource: str) -> str | None:
    """Why `resource` cannot be a policy accelerator, or None."""
    if not extended(resource):
        return (f"{resource!r} is not an extended resource (a name under a domain other "
                f"than kubernetes.io), so the apiserver's pre-filter never sends pods that "
                f"request it to Airlock")
    prefix, _, name = resource.partition("/")
    if not _QUALIFIED.match(resource) or len(prefix) > 253 or len(name) > 63:
        return f"{resource!r} is not a valid resource name (domain/name)"
    return None
