"""Pins: the node each pod of a plan is pinned to at ungate, and when a pin has failed
its pod. Pure.

Airlock plans where every pod goes, then lifts the gates; kube-scheduler binds. Pinned to
its domain only, a pod goes wherever the scheduler's scoring puts it in the domain: its
default weighs CPU and memory, not GPUs, and puts small pods on empty nodes first, so they
take the room the plan counted on for others, and a gang admitted after them is left half
placed. Pinned to its planned node (`--pin nodes`, the default), every pod goes where the
plan put it.

A pin outlives the plan's reasons: gates cannot be put back, nor a pin changed once they
are off. So Airlock pins only a pod a controller makes again when it is deleted (a pin
that fails it is undone by deleting it, and it is decided afresh), and never a pod that
names its node itself (that choice is its own). A pod without an owner is *steered*
instead: its domain pinned, and its planned node preferred (a preferred node affinity,
which kube-scheduler's default scoring weighs above its spreading), so that it lands
where the plan counted it and still goes elsewhere in its domain when that node fails."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from webhook.controller.core.cluster.filters import eligible
from webhook.controller.core.cluster.snapshot import Snapshot, fits, with_pod_slot
from webhook.controller.core.placement.packing import Plan
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.records import Record

# `nodes`: each pod pinned to its planned node; `domain`: to its domain, the scheduler
# choosing the node in it.
PinMode = Literal["nodes", "domain"]
PIN_MODES: tuple[PinMode, ...] = ("nodes", "domain")
HOSTNAME = "kubernetes.io/hostname"


def steerable(pod: PodInfo) -> bool:
    """Whether Airlock may send the pod to one node: it names no node itself."""
    where = pod.constraints
    return where.pinned is None and HOSTNAME not in where.node_selector


def pinnable(pod: PodInfo) -> bool:
    """Whether Airlock may pin the pod to one node, rather than prefer it: it names no
    node itself, and it has an owner that makes it again."""
    return pod.owned and steerable(pod)


def pin_of(record: Record, pod: PodInfo) -> str | None:
    """The node `record` pins `pod` to at ungate; None for a pod it only steers (which
    prefers its node, and is fenced), or sends nowhere."""
    node = record.node_of(pod.name)
    return node if node is not None and pinnable(pod) else None


def planned_nodes(plan: Plan, pods: Sequence[PodInfo]) -> tuple[tuple[str, str], ...]:
    """(pod name, node) for the pods of `plan` sent to their node: pinned there, or
    (without an owner) preferring it."""
    return tuple(sorted((p.name, plan.assignments[p.key]) for p in pods
                        if steerable(p) and p.key in plan.assignments))


def hold_pinned(pods: Sequence[PodInfo], record: Record, snap: Snapshot
                ) -> tuple[tuple[tuple[str, str], ...], list[PodInfo]]:
    """Of `pods` that `record` promised room: those sent to a node (the record's, for a
    member still gated or steered; the one it carries, for one let go pinned), their room
    taken there where the node still takes them; and the others, to be placed in the
    domain. A member still gated whose node has no room for it is among the others: it
    is pinned to its domain only. One let go keeps its room on its node even where pods
    bound since fill it (a serving pod kube-scheduler bound first), so that what they
    free is its and no other unit's: a pinned one can go nowhere else, and a steered
    one, nominated there, binds elsewhere in its domain at once if it can, and would
    otherwise wait for that node while the room was given away; only on the node the
    record names, not one a pod names itself. `stranded` re-plans a
    pinned one once that hold is over; one let go whose node no longer takes it at all
    holds nothing there (a steered one is placed in the domain)."""
    held: list[tuple[str, str]] = []
    rest: list[PodInfo] = []
    planned = dict(record.nodes)
    for pod in pods:
        pin = None if pod.gated else pod.constraints.pinned
        node = pin or planned.get(pod.name)
        if node is None:
            rest.append(pod)
            continue
        need = with_pod_slot(pod.requests)
        info = snap.nodes.get(node)
        # Held past what the node has free only where Airlock's own sealed record sent
        # it: a pod may name a node itself, and must not hold another's room by that.
        ours = not pod.gated and planned.get(pod.name) == node
        if info is not None and eligible(pod, info) and \
                (ours or fits(snap.free[node], need)):
            snap.take(node, need)
            held.append((pod.name, node))
        elif pin is None:
            rest.append(pod)
    return tuple(held), rest


def pin_times(records: Sequence[Record]) -> dict[tuple[str, str], float]:
    """When each pin (member, node) the records make was decided: by the latest of them
    (`records` oldest first)."""
    return {pin: record.at for record in records for pin in record.nodes}


def stranded(pod: PodInfo, pinned_at: Mapping[tuple[str, str], float], snap: Snapshot,
             now: float, timeout: float) -> tuple[str, str] | None:
    """(node, why) when a pod Airlock pinned to a node (a record says so, `pin_times`,
    and the pod carries the pin) and not bound yet can no longer go there: the node is
    gone, NotReady, cordoned or no longer takes it, or, once its room is no longer held
    for it (`timeout` after the pin), the pods bound there leave it none. None while it
    may still be bound there, and for every pod Airlock did not pin."""
    node = pod.constraints.pinned
    if node is None or pod.node_name or pod.gated:
        return None
    at = pinned_at.get((pod.name, node))
    if at is None:
        return None
    info = snap.nodes.get(node)
    if info is None:
        return node, "is gone"
    if not info.ready:
        return node, "is NotReady"
    if info.unschedulable:
        return node, "is cordoned"
    if not eligible(pod, info):
        return node, "no longer takes it (its taints or labels changed)"
    if now - at >= timeout and \
            not fits(snap.capacity.free[node], with_pod_slot(pod.requests)):
        return node, f"is too full of pods bound there to take it, and its room there " \
            f"is held no longer ({timeout:.0f}s after it was let go)"
    return None
