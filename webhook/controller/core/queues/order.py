"""Which unit goes first: by priority (the pods' `spec.priority`, resolved from their
PriorityClass at admission), then by their queue's fair share (lowest first, read afresh
at each pick, so the entry charges of gangs admitted earlier in the same round count),
then by arrival (the creation of their oldest member), then by name. Pure."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import UnitId


def queue_order(gangs: Iterable[Gang], queue_of: Callable[[Gang], str] = lambda _: "",
                share: Callable[[str], float] = lambda _: 0.0,
                head: UnitId | None = None) -> Iterator[Gang]:
    """The gangs in admission order. Each queue's own gangs keep their order (priority,
    arrival); between queues the next pick compares their first gangs, with the share
    as it stands at that moment. The `head` of the last round goes first among gangs of
    its priority: the room reserved for it drains only while it stays the head, and
    shares that move as others are admitted would otherwise hand the head, and its
    reservation, from one gang to another, and no reserved room would ever drain."""
    lines: dict[str, list[Gang]] = {}
    for gang in gangs:
        lines.setdefault(queue_of(gang), []).append(gang)
    for line in lines.values():
        line.sort(key=lambda g: (-g.priority, g.id != head, g.arrival, g.id), reverse=True)
    if len(lines) == 1:
        # One queue: no pick between queues, so no share to read at each.
        yield from reversed(next(iter(lines.values())))
        return
    while lines:
        queue = min(lines, key=lambda q: (-lines[q][-1].priority, lines[q][-1].id != head,
                                          share(q), lines[q][-1].arrival, lines[q][-1].id))
        line = lines[queue]
        yield line.pop()
        if not line:
            del lines[queue]
