"""Small typed views of the raw Pod and Node JSON the watches deliver: only the fields the
controller decides with. Client model objects for 50,000 pods would be slow and heavy."""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.accelerators import extended, recorded
from webhook.controller.core.identities import GangId, PodKey
from webhook.controller.core.records import Kind, Opener, PreemptionRecord, Record, Untrusted
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    CHECKPOINTED_AT_ANNOTATION,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GANG_SOURCE_ANNOTATION,
    GATE,
    GPU_MODELS_ANNOTATION,
    LEGACY_GANG_LABEL,
    PLACEHOLDER_LABEL,
    PLACEMENT_ANNOTATION,
    PREEMPTION_ANNOTATION,
    QUEUED_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
    SLICE_KEY_ANNOTATION,
    SYSTEM_NAMESPACE,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)
from webhook.values import MAX_PODS, MAX_SECONDS, Refused, count, instant, units

Resources = dict[str, int]
# CPU is counted in millicores and everything else in whole units (bytes for memory).
_MILLI = frozenset({"cpu"})
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_NONE: Mapping[str, str] = {}
_NO_NAMES: frozenset[str] = frozenset()


def _amount(resource: str, quantity: Any) -> int:
    """Whole units, rounded up as the scheduler rounds (milli-CPU, bytes, devices)."""
    if not isinstance(quantity, str | int | float):
        return 0
    return units(quantity, 1000 if resource in _MILLI else 1)


def _resources(raw: Mapping[str, Any] | None) -> Resources:
    return {k: _amount(k, v) for k, v in (raw or {}).items()}


def _container_requests(container: Mapping[str, Any]) -> Resources:
    # A resource given only as a limit is requested at the limit (the apiserver's
    # defaulting; extended resources such as GPUs are often written that way).
    res = container.get("resources") or {}
    return {**_resources(res.get("limits")), **_resources(res.get("requests"))}


def _add(total: Resources, more: Resources) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _at_least(total: Resources, floor: Resources) -> None:
    for k, v in floor.items():
        total[k] = max(total.get(k, 0), v)


def pod_requests(spec: Mapping[str, Any]) -> Resources:
    """What the scheduler counts for a pod, resource by resource: the larger of
    - the app containers plus every sidecar (an init container with
      `restartPolicy: Always`, which keeps running beside them), and
    - each regular init container plus the sidecars started before it (and each sidecar
      plus those before it), since init containers run one at a time;
    then the pod overhead (RuntimeClass) on top."""
    sidecars: Resources = {}
    init_peak: Resources = {}
    for c in spec.get("initContainers") or []:
        requests = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            _at_least(init_peak, sidecars)
        else:
            running = dict(sidecars)
            _add(running, requests)
            _at_least(init_peak, running)
    total: Resources = dict(sidecars)
    for c in spec.get("containers") or []:
        _add(total, _container_requests(c))
    _at_least(total, init_peak)
    _add(total, _resources(spec.get("overhead")))
    return total


@functools.lru_cache(maxsize=256)
def _devices(requested: tuple[str, ...]) -> tuple[str, ...]:
    # One shared tuple per distinct set of requests: gangs' pods mostly ask alike.
    return tuple(sorted(k for k in requested if extended(k)))


def timestamp(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _checkpoint(text: str | None) -> float | None:
    """A checkpoint time a pod states, or None when it states none we can read: a bad
    value costs the pod its protection (its work counts from its start), never a crash."""
    if not text:
        return None
    found = instant(CHECKPOINTED_AT_ANNOTATION, text)
    return found or None if isinstance(found, float) else None


Signature = tuple[Any, ...]


@functools.lru_cache(maxsize=1024)
def _interned(sig: Signature) -> Signature:
    # One tuple for every pod alike: most pods of a cluster share a handful.
    return sig


def _signature(node_selector: Mapping[str, str],
               affinity_terms: tuple[Mapping[str, Any], ...] | None,
               tolerations: tuple[Mapping[str, Any], ...], devices: tuple[str, ...]
               ) -> Signature:
    return _interned((tuple(sorted(node_selector.items())), repr(affinity_terms),
                      repr(tolerations), devices))


def _records(annotations: Mapping[str, str], uid: str, created: float, seal: Opener | None
             ) -> tuple[Record | None, PreemptionRecord | None, tuple[Untrusted, ...]]:
    """The placement and preemption recorded on a pod that `seal` opens, and those it
    does not."""
    placement_text = annotations.get(PLACEMENT_ANNOTATION)
    preemption_text = annotations.get(PREEMPTION_ANNOTATION)
    if placement_text is None and preemption_text is None:
        return None, None, ()
    placement: Record | None = None
    preemption: PreemptionRecord | None = None
    distrusted: list[Untrusted] = []
    written: tuple[tuple[Kind, str | None], ...] = (("placement", placement_text),
                                                   ("preemption", preemption_text))
    for kind, text in written:
        if text is None:
            continue
        opened = seal.loads(kind, text, uid, created) if seal is not None else \
            Untrusted(kind, "no record key to check it with")
        if isinstance(opened, Untrusted):
            distrusted.append(opened)
        elif isinstance(opened, Record):
            placement = opened
        else:
            preemption = opened
    return placement, preemption, tuple(distrusted)


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node_name: str | None
    terminal: bool
    deleting: bool
    requests: Resources
    gated: bool
    gate_index: int | None
    gang: str | None
    source: str | None
    expected_size: int | None
    topology_key: str | None
    topology_mode: str | None
    priority: int
    created: float
    labels: Mapping[str, str]
    node_selector: Mapping[str, str]
    affinity_terms: tuple[Mapping[str, Any], ...] | None
    tolerations: tuple[Mapping[str, Any], ...]
    owners: tuple[Mapping[str, Any], ...]
    # The admission recorded on this pod, when the controller can prove it wrote it.
    placement: Record | None
    annotated: bool
    # Accelerators the webhook recorded as requested (gang members only): counted even
    # when the current policy no longer names them.
    accelerators: frozenset[str]
    # The extended resources the pod requests (gang members only): a node without one of
    # them is no place for it, however many other accelerators it has free.
    devices: tuple[str, ...]
    # For preemption: when the pod started running (0 while it has not), the last
    # checkpoint it states, whether its priority class may preempt, a recorded
    # preemption (on a gang's anchor pod, when the controller can prove it wrote it).
    started: float = 0.0
    checkpointed: float | None = None
    may_preempt: bool = True
    preemption: PreemptionRecord | None = None
    # Records on the pod the controller did not write, or cannot read: never acted on.
    distrusted: tuple[Untrusted, ...] = ()
    # Finished its work: a gang member that is gone this way is not lost.
    succeeded: bool = False
    # A single pod Airlock queued (in no gang): admitted as a gang of one.
    single: bool = False
    # Being deleted after an eviction of Airlock's: the message of the DisruptionTarget
    # condition Airlock wrote on it (`Preempted: ...`, `Requeued: ...`). A leader killed
    # between the eviction and its Event leaves the pod saying why; the next one tells.
    evicted_for: str | None = None
    # What the pod's DRA claims ask for, by the resource each mapped DeviceClass counts
    # as: part of `requests`, kept apart so a claim that changes can be counted anew.
    claimed: Resources | None = None
    # What the webhook recorded of the pod's own keys: an elastic gang's minimum, the
    # expected run time in seconds, and its slice (the slice level's node label, the
    # slice's size, which slice it is in when its operator gives an index).
    min_size: int | None = None
    runtime: float | None = None
    slice_key: str | None = None
    slice_size: int | None = None
    slice_index: int | None = None
    # The GPU models it names (`gpu-airlock.io/gpu-models`), most wanted first.
    gpu_models: tuple[str, ...] = ()
    # How much of `spec.affinity.nodeAffinity` the pod has where it has no required terms
    # (0: no affinity, 1: affinity, 2: its nodeAffinity too): where the ungate patch adds
    # the requirement that fences it off room reserved for others.
    affinity_depth: int = 0
    # Why the pod cannot be decided: a mark of Airlock's it carries out of bounds, or a
    # pod the watch could not read at all. Its unit waits as `Invalid`; never raised.
    invalid: str | None = None
    # (namespace, name): a field, not a property, since rounds look it up for every pod
    # they weigh (a tenth of a large simulation went to building it again).
    key: PodKey = field(init=False, compare=False, repr=False)
    # What decides where the pod may go and whether it fits there: pods with the same
    # `signature` may use the same nodes, and with the same `fit` too they fit alike.
    # Kept, for the same reason as `key`.
    signature: Signature = field(init=False, compare=False, repr=False)
    fit: tuple[Signature, tuple[tuple[str, int], ...]] = field(init=False, compare=False,
                                                               repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", PodKey(self.namespace, self.name))
        sig = _signature(self.node_selector, self.affinity_terms, self.tolerations,
                         self.devices)
        object.__setattr__(self, "signature", sig)
        object.__setattr__(self, "fit", (sig, tuple(sorted(self.requests.items()))))

    @property
    def gang_id(self) -> GangId | None:
        return GangId(self.namespace, self.gang) if self.gang else None

    @property
    def active(self) -> bool:
        return not self.terminal and not self.deleting

    def with_claims(self, claimed: Resources) -> PodInfo:
        """The pod, its DRA claims now asking for `claimed`."""
        requests = dict(self.requests)
        for k, v in (self.claimed or {}).items():
            left = requests.get(k, 0) - v
            if left:
                requests[k] = left
            else:
                requests.pop(k, None)
        _add(requests, claimed)
        devices = _devices(tuple(k for k, v in requests.items() if v > 0)) \
            if self.devices or self.claimed or claimed else ()
        return dataclasses.replace(self, requests=requests, devices=devices,
                                   claimed=claimed or None)

    @classmethod
    def parse(cls, raw: Mapping[str, Any], seal: Opener | None = None,
              claimed: Resources | None = None) -> PodInfo:
        """The view of a pod; its records count only where `seal` opens them (with no
        seal, none does); `claimed`: what its DRA claims ask for (`webhook.devices`)."""
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        affinity = spec.get("affinity")
        node_affinity = (affinity or {}).get("nodeAffinity")
        required = (node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
        # Pods outside any gang only count for capacity: keep nothing else of them, which
        # is most of the memory at 50,000 pods. A queued single is decided like a gang
        # until it is bound; from then on it only counts for capacity too.
        gang = labels.get(GANG_LABEL) or labels.get(LEGACY_GANG_LABEL)
        in_gang = gang is not None
        single = not in_gang and annotations.get(QUEUED_ANNOTATION) == "true"
        node_name = spec.get("nodeName") or None
        decided = in_gang or (single and node_name is None)
        requests = pod_requests(spec)
        if claimed:
            _add(requests, claimed)
        if PLACEHOLDER_LABEL in labels and meta.get("namespace") == SYSTEM_NAMESPACE:
            # The room a placeholder holds is its gang's, admitted into it: not used.
            requests = {}
        created = timestamp(meta.get("creationTimestamp"))
        counts = _Counts(annotations)
        uid = meta.get("uid", "")
        placement, preemption, distrusted = _records(annotations, uid, created, seal)
        deleting = meta.get("deletionTimestamp") is not None
        return cls(
            namespace=meta.get("namespace", ""), name=meta.get("name", ""),
            uid=uid, node_name=node_name,
            terminal=(raw.get("status") or {}).get("phase") in TERMINAL_PHASES,
            deleting=deleting,
            requests=requests,
            gated=GATE in gates, gate_index=gates.index(GATE) if GATE in gates else None,
            gang=gang,
            source=annotations.get(GANG_SOURCE_ANNOTATION),
            expected_size=counts.get(GANG_EXPECTED_SIZE_ANNOTATION) if in_gang else None,
            topology_key=annotations.get(TOPOLOGY_KEY_ANNOTATION),
            topology_mode=annotations.get(TOPOLOGY_MODE_ANNOTATION),
            priority=spec.get("priority") or 0,
            created=created,
            # Pods asking for extended resources keep their labels too: preemption
            # matches them against PodDisruptionBudget selectors.
            labels=labels if decided or any("/" in k for k in requests) else _NONE,
            node_selector=(spec.get("nodeSelector") or _NONE) if decided else _NONE,
            affinity_terms=tuple(required.get("nodeSelectorTerms") or ())
            if required and decided else None,
            tolerations=tuple(spec.get("tolerations") or ()) if decided else (),
            owners=tuple(meta.get("ownerReferences") or ()) if in_gang else (),
            placement=placement,
            annotated=bool(annotations),
            # Only what the pod itself requests, all the webhook ever records: a mark on a
            # pod the webhook never saw must not make another team's device count.
            accelerators=recorded(annotations.get(ACCELERATORS_ANNOTATION, "")).intersection(
                k for k, v in requests.items() if v > 0) if decided else _NO_NAMES,
            devices=_devices(tuple(k for k, v in requests.items() if v > 0))
            if decided else (),
            started=timestamp((raw.get("status") or {}).get("startTime")),
            checkpointed=_checkpoint(annotations.get(CHECKPOINTED_AT_ANNOTATION)),
            may_preempt=spec.get("preemptionPolicy") != "Never",
            preemption=preemption, distrusted=distrusted,
            succeeded=(raw.get("status") or {}).get("phase") == "Succeeded",
            single=single, claimed=claimed or None,
            evicted_for=_evicted_for(raw) if deleting else None,
            min_size=counts.get(GANG_EXPECTED_MIN_ANNOTATION) if in_gang else None,
            # Bound too: a pod's expected end is what backfill plans the head's start
            # with, and a queued single pod is bound most of its life. Only on pods
            # Airlock marked as its own: another pod's word moves no head.
            runtime=counts.get(RUNTIME_SECONDS_ANNOTATION, most=MAX_SECONDS)
            if decided or single else None,
            slice_key=annotations.get(SLICE_KEY_ANNOTATION) if in_gang else None,
            slice_size=counts.get(SLICE_EXPECTED_SIZE_ANNOTATION) if in_gang else None,
            slice_index=counts.get(SLICE_INDEX_ANNOTATION, least=0, most=MAX_PODS - 1)
            if in_gang else None,
            gpu_models=_models(annotations.get(GPU_MODELS_ANNOTATION)) if decided else (),
            affinity_depth=(2 if node_affinity is not None else 1 if affinity is not None
                            else 0) if decided and required is None else 0,
            invalid=counts.invalid,
        )


def _models(text: Any) -> tuple[str, ...]:
    """The models a pod names, bounded: a model name is a label value's length at most,
    and no cluster has dozens of models."""
    if not isinstance(text, str):
        return ()
    names = (n.strip() for n in text[:1024].split(",", 16)[:16])
    return tuple(dict.fromkeys(n for n in names if n and len(n) <= 63))


def unreadable(raw: Mapping[str, Any], reason: str) -> PodInfo:
    """A pod `PodInfo.parse` could not read: kept under its name, so the cache stays
    current and its gang is told, with what it requests where that can still be read
    (room it holds on a node is not room to promise), and never decided."""
    def mapping(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    meta, spec = mapping(raw.get("metadata")), mapping(raw.get("spec"))
    labels = mapping(meta.get("labels"))

    try:
        requests = pod_requests(spec)
    except Exception:  # the reason it is unreadable may be here too
        requests = {}
    gang = text(labels.get(GANG_LABEL)) or None
    gates = spec.get("schedulingGates")
    gated = isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == GATE for g in gates)
    return PodInfo(
        namespace=text(meta.get("namespace")), name=text(meta.get("name")),
        uid=text(meta.get("uid")), node_name=text(spec.get("nodeName")) or None,
        terminal=False, deleting=meta.get("deletionTimestamp") is not None,
        requests=requests, gated=gated, gate_index=None, gang=gang, source=None,
        expected_size=None, topology_key=None, topology_mode=None, priority=0, created=0.0,
        labels=_NONE, node_selector=_NONE, affinity_terms=None, tolerations=(), owners=(),
        placement=None, annotated=False, accelerators=_NO_NAMES, devices=(),
        invalid=f"the pod cannot be read: {reason}")


class _Counts:
    """The counts the webhook recorded on a pod, read within bounds. One out of them is a
    mark the webhook never writes (a pod it never saw, or one forged while it was down):
    the first such makes the pod invalid, and it is set aside, never acted on."""

    __slots__ = ("annotations", "invalid")

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations
        self.invalid: str | None = None

    def get(self, key: str, least: int = 1, most: int = MAX_PODS) -> int | None:
        text = self.annotations.get(key)
        if text is None:
            return None
        found = count(key, text, least, most) if isinstance(text, str) else \
            Refused(key, repr(text), "text")
        if isinstance(found, Refused):
            self.invalid = self.invalid or f"annotation {found.message}"
            return None
        return found


# How the message of the DisruptionTarget condition Airlock writes on a victim begins.
EVICTED_FOR = ("Preempted:", "Requeued:")


def _evicted_for(raw: Mapping[str, Any]) -> str | None:
    for condition in (raw.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "DisruptionTarget":
            message = str(condition.get("message") or "")
            return message if message.startswith(EVICTED_FOR) else None
    return None


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: tuple[Mapping[str, Any], ...]
    allocatable: Resources
    ready: bool
    unschedulable: bool

    @classmethod
    def parse(cls, raw: Mapping[str, Any]) -> NodeInfo:
        meta, spec, status = (raw.get("metadata") or {}, raw.get("spec") or {},
                              raw.get("status") or {})
        ready = any(c.get("type") == "Ready" and c.get("status") == "True"
                    for c in status.get("conditions") or [])
        return cls(name=meta.get("name", ""), labels=meta.get("labels") or {},
                   taints=tuple(spec.get("taints") or ()),
                   allocatable=_resources(status.get("allocatable")),
                   ready=ready, unschedulable=bool(spec.get("unschedulable")))
