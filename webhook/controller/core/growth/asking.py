"""Capacity requests (`spec.capacity`, docs/autoscaling.md): which gangs ask the cluster
to grow, and what becomes of what already asks (placeholder pods, or ProvisioningRequests).

A gang asks when it fits no domain of today's nodes while its queue may admit it, and it
heads its queue: each queue asks for at most one gang at a time, the one the next room
goes to. What asks goes when the gang is admitted (provisioned), when it no longer asks
(it is gone, or preempts, or waits for something else: withdrawn), when the autoscaler
gives up on it (failed), or after the policy's timeout (expired); after failing or
expiring, the gang waits the backoff before it asks again."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from webhook.controller.core.actions import Action, Admit, Event, Wait
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.controller.core.queues.quotas import Quotas

Ending = Literal["provisioned", "withdrawn", "failed", "expired"]


@dataclass(frozen=True, slots=True)
class Asking:
    """What asks for room for a unit, as the controller reads it back: a placeholder pod,
    or a ProvisioningRequest; `failed`, why the autoscaler gave up on it, if it did."""

    name: str
    unit: UnitId
    created: float
    failed: str | None = None
    # The room is there: the placeholder is bound, or the request Provisioned.
    ready: bool = False


@dataclass(frozen=True, slots=True)
class Request:
    """A request to make for the gang's pods."""

    unit: UnitId
    pods: tuple[PodInfo, ...]
    # The GPU model it waits for, where policy names models: the request is for its nodes.
    model: str | None = None


@dataclass(frozen=True, slots=True)
class Release:
    unit: UnitId
    names: tuple[str, ...]
    ending: Ending
    # Who to tell: the gang's pods, when it still has some.
    pods: tuple[PodInfo, ...] = ()
    # Why, when the autoscaler said.
    why: str = ""


@dataclass(frozen=True, slots=True)
class Growth:
    make: tuple[Request, ...]
    release: tuple[Release, ...]
    # Units that asked and are waiting out their backoff: the next request's time.
    backing_off: Mapping[UnitId, float]


@dataclass(frozen=True, slots=True)
class CapacitySettings:
    timeout: float = 600.0
    backoff: float = 300.0


def askers(actions: Iterable[Action], quotas: Quotas) -> dict[UnitId, Wait]:
    """The gangs that ask this round: per queue, the first whose wait says it may grow."""
    asking: dict[UnitId, Wait] = {}
    queues: set[str] = set()
    for action in actions:
        if isinstance(action, Wait) and action.may_grow:
            queue = quotas.queue_of(action.unit.namespace)
            if queue not in queues:
                queues.add(queue)
                asking[action.unit] = action
    return asking


def grow(actions: list[Action], quotas: Quotas, there: Iterable[Asking],
         failed: Mapping[UnitId, float], now: float, settings: CapacitySettings) -> Growth:
    """What to make and end, given the round's `actions`, what asks `there`, and when each
    unit's last request `failed`."""
    backing_off = {u: at for u, at in failed.items() if now - at < settings.backoff}
    asking = {u: wait for u, wait in askers(actions, quotas).items() if u not in backing_off}
    admitted = {a.unit: a.ungate for a in actions if isinstance(a, Admit)}
    pods_of = {a.unit: a.pods for a in actions if isinstance(a, Wait)}
    by_unit: dict[UnitId, list[Asking]] = {}
    for one in there:
        by_unit.setdefault(one.unit, []).append(one)
    release = []
    for unit, held in sorted(by_unit.items()):
        names = tuple(sorted(a.name for a in held))
        gave_up = next((a.failed for a in held if a.failed), None)
        if unit in admitted:
            release.append(Release(unit, names, "provisioned", admitted[unit]))
        elif unit not in asking:
            release.append(Release(unit, names, "withdrawn", pods_of.get(unit, ())))
        elif gave_up is not None:
            release.append(Release(unit, names, "failed", asking.pop(unit).pods, gave_up))
            backing_off[unit] = now
        elif now - min(a.created for a in held) >= settings.timeout:
            release.append(Release(unit, names, "expired", asking.pop(unit).pods))
            backing_off[unit] = now
    make = tuple(Request(u, wait.pods, wait.model) for u, wait in asking.items()
                 if u not in by_unit)
    return Growth(make, tuple(release), backing_off)


def events_of(growth: Growth, settings: CapacitySettings, how: str) -> list[Event]:
    """What the gangs' pods are told of their requests, made `how`."""
    told = [Event(r.pods, "Normal", "CapacityRequested",
                  f"CapacityRequested: asked the cluster's autoscaler for the room the "
                  f"gang's {len(r.pods)} pods lack, with {how}")
            for r in growth.make]
    for release in growth.release:
        if release.ending == "provisioned":
            told.append(Event(release.pods, "Normal", "CapacityProvisioned",
                              "CapacityProvisioned: admitted; its placeholders are removed"))
        elif release.ending == "expired":
            told.append(Event(release.pods, "Warning", "CapacityExpired",
                              f"CapacityExpired: no room came within "
                              f"{settings.timeout:.0f}s; the request is removed and it "
                              f"asks again after {settings.backoff:.0f}s"))
        elif release.ending == "failed":
            told.append(Event(release.pods, "Warning", "CapacityFailed",
                              f"CapacityFailed: the autoscaler gave up ({release.why}); the "
                              f"request is removed and it asks again after "
                              f"{settings.backoff:.0f}s"))
    return told


def awaiting(there: Iterable[Asking]) -> frozenset[UnitId]:
    """The units whose room is asked for and not all there yet."""
    return frozenset(a.unit for a in there if not a.ready and not a.failed)
