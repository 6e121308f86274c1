"""The controller's view of a pod, read from the raw JSON the watch delivers: only the
fields it decides with (client model objects for 50,000 pods would be slow and heavy).

A view is a few parts, each read by its own module: what the webhook marked on the pod
(`marks`), where it may go (`constraints`), and what the controller itself recorded on
it (`Recorded`, here)."""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.controller.core.constraints import UNCONSTRAINED, Constraints, Signature
from webhook.controller.core.identities import GangId, PodKey
from webhook.controller.core.marks import Marks
from webhook.controller.core.records import Kind, Opener, PreemptionRecord, Record, Untrusted
from webhook.controller.core.resources import Resources, add, pod_requests
from webhook.keys import (
    CHECKPOINTED_AT_ANNOTATION,
    GANG_LABEL,
    GATE,
    PLACEHOLDER_LABEL,
    PLACEMENT_ANNOTATION,
    PREEMPTION_ANNOTATION,
    PREEMPTION_NOTICE_ANNOTATION,
    SYSTEM_NAMESPACE,
)
from webhook.values import instant

_TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
# How the message of the DisruptionTarget condition Airlock writes on a victim begins.
_EVICTED_FOR = ("Preempted:", "Requeued:")
_NONE: Mapping[str, str] = {}
_RECORDS: tuple[tuple[Kind, str], ...] = (("placement", PLACEMENT_ANNOTATION),
                                          ("preemption", PREEMPTION_ANNOTATION))


def timestamp(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True)
class Recorded:
    """What the controller wrote on the pod. Its records count only where the controller
    can prove it wrote them; those it cannot are `distrusted`, and never acted on."""

    # The admission, on a gang's anchor pod.
    placement: Record | None = None
    # A preemption under way, on the preemptor's anchor pod.
    preemption: PreemptionRecord | None = None
    distrusted: tuple[Untrusted, ...] = ()
    # Being deleted after an eviction of Airlock's: the message of the DisruptionTarget
    # condition Airlock wrote on it (`Preempted: ...`, `Requeued: ...`). A leader killed
    # between the eviction and its Event leaves the pod saying why; the next one tells.
    evicted_for: str | None = None
    # A victim told to checkpoint: the deadline its notice states (`preemption.notices`).
    notice: float | None = None

    @classmethod
    def read(cls, annotations: Mapping[str, str], uid: str, created: float,
             seal: Opener | None, evicted_for: str | None) -> Recorded:
        """The records on the pod with `uid` made at `created` that `seal` opens (with no
        seal, none does), and those it does not."""
        noticed = annotations.get(PREEMPTION_NOTICE_ANNOTATION)
        if evicted_for is None and noticed is None and \
                all(key not in annotations for _, key in _RECORDS):
            return NOTHING_RECORDED
        opened = [_open(seal, kind, annotations.get(key), uid, created)
                  for kind, key in _RECORDS]
        return cls(placement=next((r for r in opened if isinstance(r, Record)), None),
                   preemption=next((r for r in opened if isinstance(r, PreemptionRecord)),
                                   None),
                   distrusted=tuple(r for r in opened if isinstance(r, Untrusted)),
                   evicted_for=evicted_for, notice=_deadline(noticed))


NOTHING_RECORDED = Recorded()


def _open(seal: Opener | None, kind: Kind, text: str | None, uid: str, created: float
          ) -> Record | PreemptionRecord | Untrusted | None:
    if text is None:
        return None
    if seal is None:
        return Untrusted(kind, "no record key to check it with")
    return seal.loads(kind, text, uid, created)


def _evicted_for(status: Mapping[str, Any]) -> str | None:
    for condition in status.get("conditions") or ():
        if condition.get("type") == "DisruptionTarget":
            message = str(condition.get("message") or "")
            return message if message.startswith(_EVICTED_FOR) else None
    return None


def _owned(owners: Any) -> bool:
    return isinstance(owners, list) and any(
        isinstance(o, Mapping) and o.get("controller") is True for o in owners)


def _deadline(text: str | None) -> float | None:
    """The deadline of a notice the controller wrote; None for none it can read."""
    found = instant(PREEMPTION_NOTICE_ANNOTATION, text) if text else None
    return found if isinstance(found, float) else None


def _checkpoint(text: str | None) -> float | None:
    """A checkpoint time a pod states, or None when it states none we can read: a bad
    value costs the pod its protection (its work counts from its start), never a crash."""
    if not text:
        return None
    found = instant(CHECKPOINTED_AT_ANNOTATION, text)
    return found or None if isinstance(found, float) else None


def _requests(meta: Mapping[str, Any], spec: Mapping[str, Any], claimed: Resources | None
              ) -> Resources:
    requests = pod_requests(spec)
    if PLACEHOLDER_LABEL in (meta.get("labels") or {}) and \
            meta.get("namespace") == SYSTEM_NAMESPACE:
        # The room a placeholder holds is its gang's, admitted into it: not used.
        return {}
    add(requests, claimed or {})
    return requests


@dataclass(frozen=True, slots=True)
class PodInfo:
    namespace: str
    name: str
    uid: str
    node_name: str | None
    terminal: bool
    deleting: bool
    # Whether Airlock's gate is on it, and where among its gates (the ungate patch removes
    # it by index).
    gated: bool
    gate_index: int | None
    priority: int
    # Its PriorityClass's name: fixed at creation, unlike its labels, and given by policy
    # (validation denies a class's PriorityClass to a pod of another class), so what
    # trusts a pod's class reads this.
    priority_class: str | None
    # Whether its priority class may preempt.
    may_preempt: bool
    requests: Resources
    created: float
    # When it started running (0 while it has not), and the last checkpoint it states.
    started: float
    checkpointed: float | None
    labels: Mapping[str, str]
    owners: tuple[Mapping[str, Any], ...]
    annotated: bool
    marks: Marks
    constraints: Constraints
    recorded: Recorded
    # Finished its work: a gang member that is gone this way is not lost.
    succeeded: bool = False
    # A controller owns it (an owner reference with `controller: true`: a Job, an
    # operator's job, a ReplicaSet), which makes it again when it is deleted.
    owned: bool = False
    # What the pod's DRA claims ask for, by the resource each mapped DeviceClass counts
    # as: part of `requests`, kept apart so a claim that changes can be counted anew.
    claimed: Resources | None = None
    # Why the pod cannot be decided: a mark of Airlock's it carries out of bounds, or a
    # pod the watch could not read at all. Its unit waits as `Invalid`; never raised.
    invalid: str | None = None
    # The node its status names as nominated while it is not bound. On a gated pod only
    # Airlock writes one (kube-scheduler never looks at a gated pod), for a preemptor's
    # room. On a pod Airlock does not decide (a serving pod, as shipped), kube-scheduler
    # does, for the room its own preemption makes the pod: taken, as if bound there.
    nominated: str | None = None
    # (namespace, name): a field, not a property, since rounds look it up for every pod
    # they weigh (a tenth of a large simulation went to building it again).
    key: PodKey = field(init=False, compare=False, repr=False)
    # Pods with the same `fit` may use the same nodes and fit there alike. Kept, for the
    # same reason as `key`.
    fit: tuple[Signature, tuple[tuple[str, int], ...]] = field(init=False, compare=False,
                                                               repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", PodKey(self.namespace, self.name))
        object.__setattr__(self, "fit", (self.constraints.signature,
                                         tuple(sorted(self.requests.items()))))

    @property
    def gang_id(self) -> GangId | None:
        return GangId(self.namespace, self.marks.gang) if self.marks.gang else None

    @property
    def active(self) -> bool:
        return not self.terminal and not self.deleting

    @property
    def holds_room(self) -> bool:
        """Whether kube-scheduler still counts what it requests where it is: until it
        is terminal or gone from the API, marked for deletion or not."""
        return not self.terminal

    @property
    def room(self) -> str | None:
        """The node whose room it takes: where it is bound, or where kube-scheduler
        nominated it, not bound yet (never a gated pod's: Airlock's own nomination, whose
        room the preemption record holds)."""
        return self.node_name or (None if self.gated else self.nominated)

    def with_claims(self, claimed: Resources, models: tuple[str, ...] | None = None
                    ) -> PodInfo:
        """The pod, its DRA claims now asking for `claimed`, and allowing the GPU
        `models` (None: any)."""
        requests = dict(self.requests)
        for k, v in (self.claimed or {}).items():
            left = requests.get(k, 0) - v
            if left:
                requests[k] = left
            else:
                requests.pop(k, None)
        add(requests, claimed)
        constraints = self.constraints.requesting(requests) \
            if self.constraints.devices or self.claimed or claimed else self.constraints
        if models != constraints.claim_models:
            constraints = dataclasses.replace(constraints, claim_models=models)
        return dataclasses.replace(self, requests=requests, constraints=constraints,
                                   claimed=claimed or None)

    @classmethod
    def parse(cls, raw: Mapping[str, Any], seal: Opener | None = None,
              claimed: Resources | None = None) -> PodInfo:
        """The view of a pod; its records count only where `seal` opens them (with no
        seal, none does); `claimed`: what its DRA claims ask for (`webhook.devices`)."""
        meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
        status = raw.get("status") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        gates = [g.get("name") for g in spec.get("schedulingGates") or []]
        node_name = spec.get("nodeName") or None
        requests = _requests(meta, spec, claimed)
        marks = Marks.read(labels, annotations, requests, node_name)
        # Pods Airlock does not decide only count for capacity: keep nothing else of them,
        # which is most of the memory at 50,000 pods.
        decided = marks.decided(node_name)
        uid, created = meta.get("uid", ""), timestamp(meta.get("creationTimestamp"))
        deleting = meta.get("deletionTimestamp") is not None
        nominated = status.get("nominatedNodeName") \
            if GATE in gates or not (node_name or decided) else None
        return cls(
            namespace=meta.get("namespace", ""), name=meta.get("name", ""), uid=uid,
            node_name=node_name, terminal=status.get("phase") in _TERMINAL_PHASES,
            deleting=deleting, succeeded=status.get("phase") == "Succeeded",
            gated=GATE in gates, gate_index=gates.index(GATE) if GATE in gates else None,
            priority=spec.get("priority") or 0,
            priority_class=spec.get("priorityClassName") or None,
            may_preempt=spec.get("preemptionPolicy") != "Never",
            requests=requests, claimed=claimed or None,
            created=created, started=timestamp(status.get("startTime")),
            checkpointed=_checkpoint(annotations.get(CHECKPOINTED_AT_ANNOTATION)),
            # Pods asking for extended resources keep their labels too: preemption
            # matches them against PodDisruptionBudget selectors.
            labels=labels if decided or any("/" in k for k in requests) else _NONE,
            # A gang's, to find its size; a queued single's, to know if it is made again
            # when moved (`moving`).
            owners=tuple(meta.get("ownerReferences") or ())
            if marks.in_gang or marks.single else (),
            owned=_owned(meta.get("ownerReferences")),
            annotated=bool(annotations), marks=marks,
            constraints=Constraints.read(spec, annotations, requests) if decided
            else UNCONSTRAINED,
            recorded=Recorded.read(annotations, uid, created, seal,
                                   _evicted_for(status) if deleting else None),
            invalid=marks.refused,
            nominated=nominated if type(nominated) is str and nominated else None)


def unreadable(raw: Mapping[str, Any], reason: str) -> PodInfo:
    """A pod `PodInfo.parse` could not read: kept under its name, so the cache stays
    current and its gang is told, with what it requests where that can still be read
    (room it holds on a node is not room to promise), and never decided."""
    def mapping(value: Any) -> Mapping[str, Any]:
        return value if isinstance(value, Mapping) else {}

    def text(value: Any) -> str:
        return value if isinstance(value, str) else ""

    meta, spec = mapping(raw.get("metadata")), mapping(raw.get("spec"))
    try:
        requests = pod_requests(spec)
    except Exception:  # the reason it is unreadable may be here too
        requests = {}
    gang = text(mapping(meta.get("labels")).get(GANG_LABEL)) or None
    gates = spec.get("schedulingGates")
    gated = isinstance(gates, list) and any(
        isinstance(g, Mapping) and g.get("name") == GATE for g in gates)
    return PodInfo(
        namespace=text(meta.get("namespace")), name=text(meta.get("name")),
        uid=text(meta.get("uid")), node_name=text(spec.get("nodeName")) or None,
        terminal=False, deleting=meta.get("deletionTimestamp") is not None, gated=gated,
        gate_index=None, priority=0, priority_class=None, may_preempt=True, requests=requests,
        created=0.0,
        started=0.0, checkpointed=None, labels=_NONE, owners=(), annotated=False,
        marks=Marks(gang=gang), constraints=UNCONSTRAINED,
        recorded=NOTHING_RECORDED, invalid=f"the pod cannot be read: {reason}")
