"""What a gang convention is: one small class that recognises its operator's pods and,
when only the operator's object states the gang's size, says where that object is and how
to read the size off it; and the helpers that read a pod for it. Each operator's
convention is its `reading` module in webhook/operators/<name>/; the owner lookups
conventions share are in `owners`, the sizes read off owner objects in `sizes`.
Everything here is pure: the controller does the reading."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from webhook.pods import PodView
from webhook.values import MAX_PODS, Refused, count


class Membership(NamedTuple):
    """A pod's membership in a gang: the gang's name (unique per namespace), its size
    when the pod says it (None when only the owner object knows), and the convention
    that found it. A NamedTuple, built on every admission of a gang pod: cheaper than a
    frozen dataclass (see classifying.Decision), and built positionally, as keywords
    are matched name by name."""

    name: str
    size: int | None
    source: str
    # Set when the pod names a size that is not a positive integer: validation denies.
    size_error: str | None = None


@runtime_checkable
class Convention(Protocol):
    """One operator's way of saying which pods belong together."""

    name: str
    # The label every pod of such a gang carries: `detect` is asked only about pods that
    # have it, since nearly every pod an admission review brings has none. Empty for a
    # convention read from the spec, asked last about every pod.
    label: str

    def detect(self, pod: PodView) -> Membership | None:
        """The pod's gang under this convention, or None when it does not apply."""
        ...


@dataclass(frozen=True, slots=True)
class SizeUnknown:
    """Why a gang's size cannot be known: the owner kind is not installed, the owner
    states none, the members disagree. The gang waits and its pods are told why."""

    reason: str


@dataclass(frozen=True, slots=True)
class Elastic:
    """The size of a gang that may run short: admitted once `minimum` pods fit, it takes
    up to `size` as room frees (a PyTorchJob's elasticPolicy, a RayCluster's worker
    groups' minReplicas)."""

    size: int
    minimum: int


@dataclass(frozen=True, slots=True)
class OwnerAddress:
    """Where the object that states a gang's size lives, in the pod's namespace."""

    group: str
    version: str
    plural: str
    name: str

    @property
    def kind(self) -> str:
        return f"{self.plural}.{self.group}/{self.version}"


# A pod's ownerReferences as the API returns them.
OwnerRefs = Sequence[Mapping[str, Any]]
# Whether the pods a pod template (raw JSON) makes join their gang.
Joins = Callable[[Any], bool]


@runtime_checkable
class OwnerSized(Protocol):
    """The optional half of a convention whose gang size only the owner object states."""

    def owner(self, labels: Mapping[str, str], refs: OwnerRefs) -> OwnerAddress | SizeUnknown:
        """Where the owner is, from the pod's labels and ownerReferences: a convention
        states it as one of the lookups in `owners`."""
        ...

    def size(self, owner: Mapping[str, Any], labels: Mapping[str, str], joins: Joins
             ) -> int | Elastic | SizeUnknown:
        """The gang size the owner object states (raw JSON, read with `sizes` and
        bounded by its `gang_size`), with its minimum when it states one (`Elastic`), or
        why it states none.
        `joins` says whether the pods of a pod template join the gang (a CPU-only Ray
        head or MPI launcher does not: the webhook leaves it ungated)."""
        ...


@runtime_checkable
class Indexed(Protocol):
    """The optional part of a convention whose operator numbers a gang's pods from 0 (an
    Indexed Job's completion index): the webhook tells the controller which slice of the
    gang a pod is in by it."""

    def index(self, pod: PodView) -> int | None:
        """The pod's number within its gang, None when the pod carries none."""
        ...


@runtime_checkable
class SamePriority(Protocol):
    """The optional part of a convention whose owner the scheduler holds to its pods'
    priority (a Kubernetes PodGroup): a gang lifted against it would only fail to bind."""

    def priority_problem(self, owner: Mapping[str, Any], pods: int) -> str | None:
        """Why a gang whose pods have priority `pods` cannot run under `owner`, if so."""
        ...


def whole_text(raw: str | None) -> int | None:
    """An operator's index of a pod in its gang (from 0, plain digits), else None."""
    if raw is None:
        return None
    found = count("index", raw, least=0, most=MAX_PODS - 1)
    return found if isinstance(found, int) else None


def parse_size(raw: str | None, key: str) -> tuple[int | None, str | None]:
    """A gang size annotation as (size, error)."""
    if raw is None:
        return None, f"annotation {key} is missing"
    size = count(key, raw)
    if isinstance(size, Refused):
        return None, f"annotation {size.message}"
    return size, None


def named_by(pod: PodView, label: str, source: str) -> Membership | None:
    """The pod's gang when one label names it and only the owner states its size."""
    name = pod.labels.get(label)
    return Membership(name, None, source) if name else None


def sized_by(pod: PodView, label: str, key: str, source: str) -> Membership | None:
    """The pod's gang when one label names it and the annotation `key` states its size."""
    name = pod.labels.get(label)
    return sized(name, source, pod, key) if name else None


def sized(name: str, source: str, pod: PodView, key: str) -> Membership:
    size, error = parse_size(pod.annotations.get(key), key)
    return Membership(name, size, source, error)


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value(name: str) -> str:
    """The gang's name as a label value: itself when it is one, else a readable prefix
    and a hash, so long compound names (jobset + replicated job) still select cleanly."""
    if len(name) <= 63 and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    prefix = re.sub(r"[^-A-Za-z0-9_.]", "-", name)[:52].strip("-_.")
    return f"{prefix}-{digest}" if prefix else digest
