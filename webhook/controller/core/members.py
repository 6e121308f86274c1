"""Who of a unit goes now: the first stage of its way through a round (`stages.members`).

A new gang goes whole, once every member exists, or once its minimum does (an elastic
gang); beyond its size, the first by creation make the gang and later ones stay gated,
saying why. A gang that already runs takes in replacements for members that are gone and
late joiners after its size grew: together, once enough are there to make it whole again
(an elastic gang: to bring it back to its minimum; above that, each as it fits). What
waits says why: not all there (`Incomplete`), no size to know (`SizeUnknown`), beyond its
size (`Oversize`). Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from webhook.controller.core.actions import Wait
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang, SizeAnswer
from webhook.controller.core.identities import UnitId
from webhook.controller.core.pods import PodInfo
from webhook.conventions.base import SizeUnknown


class Take(NamedTuple):
    """The members to take now; how many of them must go together (the rest, up to all,
    go too when they fit: an elastic gang's pods above its minimum); and how many of the
    first restore what the gang was admitted with, and are not charged to its queue
    again. A NamedTuple: every waiting unit makes one every round."""

    members: list[PodInfo]
    must: int
    exempt: int = 0


def size_of(gang: Gang, looked_up: Mapping[UnitId, SizeAnswer]) -> int | Wait | None:
    """The gang's size; why it cannot be known; None while its owner is looked up."""
    size = gang.size(looked_up)
    if isinstance(size, SizeUnknown):
        return Wait(gang.id, tuple(gang.waiting), "SizeUnknown", size.reason, warning=True)
    return size


def _oversize(gang: Gang, extras: Sequence[PodInfo], message: str) -> list[Wait]:
    return [Wait(gang.id, tuple(extras), "Oversize", f"{message}; this pod is not part of it",
                 warning=True)] if extras else []


def _outlook(gang: Gang, size: int, snap: Snapshot) -> str:
    """What the whole gang will need, judged from the members present, and the best room
    there is now: so a person knows early whether waiting for the rest will be enough."""
    anchor = gang.members[0]
    key = anchor.marks.topology_key
    if not key:
        return ""
    need = round(snap.need(gang.members) * size / len(gang.members))
    best = max(snap.domain_free(anchor, key).values(), default=0)
    return f"; needs {need} GPUs in one {key} domain, the best has {best} free"


def new_members(gang: Gang, size: int, least: int, now: float, warn_after: float,
                snap: Snapshot) -> tuple[Take | None, list[Wait]]:
    """A new gang: all of it, once every member exists, or once `least` do; incomplete
    for longer than `warn_after`, it says so as a warning."""
    present = len(gang.members)
    if present < least:
        late = now - gang.arrival > warn_after
        start = f", {least} to start" if least < size else ""
        return None, [Wait(gang.id, gang.members, "Incomplete",
                           f"{present}/{size} pods present{start}"
                           f"{_outlook(gang, size, snap)}", warning=late)]
    extras = gang.members[size:]
    return Take(list(gang.members[:size]), least), _oversize(
        gang, extras, f"{present} pods for a gang of {size}") if extras else []


def joiners(gang: Gang, size: int, least: int, now: float, warn_after: float
            ) -> tuple[Take | None, list[Wait]]:
    """A gang that already runs: its waiting pods, once enough are there (and a warning
    when they have waited for the rest longer than `warn_after`)."""
    placed = len(gang.let_go) + len(gang.promised)
    room, waiting = size - placed, gang.waiting
    if room <= 0:
        return None, _oversize(gang, waiting, f"the gang of {size} already has {placed} "
                                              f"members admitted")
    must = max(least - placed, 0)
    if len(waiting) < must:
        late = now - min(p.created for p in waiting) > warn_after
        return None, [Wait(gang.id, tuple(waiting), "Incomplete",
                           f"{len(waiting)}/{must} pods present to rejoin a gang of {size} "
                           f"running with {placed}", warning=late)]
    return Take(waiting[:room], must, _restoring(gang, size, least)), _oversize(
        gang, waiting[room:], f"{placed + len(waiting)} pods for a gang of {size}")


def _restoring(gang: Gang, size: int, least: int) -> int:
    """How many of a running gang's waiting pods restore what Airlock admitted it with:
    up to its minimum (all of it, for a gang that runs whole or not at all), and never
    beyond the size it was first admitted at. An elastic gang's growth, a gang whose
    owner grew it, and a gang Airlock never admitted (its first pods were placed with
    `nodeName`) are charged like any other."""
    if not gang.records:
        return 0
    admitted = gang.records[0].size or size
    placed = len(gang.let_go) + len(gang.promised)
    return max(min(least, admitted, size) - placed, 0)


def present(gang: Gang, members: Sequence[PodInfo], size: int) -> str:
    """How many pods the gang has, as a wait's message begins."""
    if gang.single:
        return ""
    if gang.started:
        return f"{len(members)} pods to rejoin a gang of {size}; "
    return f"{min(len(gang.members), size)}/{size} pods present; "


def joining_note(gang: Gang, size: int) -> str:
    """What an admission of joiners adds to its event."""
    running = len(gang.let_go) + len(gang.promised)
    note = f"; joining {running} members already admitted"
    first = gang.records[0].size if gang.records else None
    if first is not None and first != size:
        note += f"; the gang's size changed from {first} to {size}"
    return note
