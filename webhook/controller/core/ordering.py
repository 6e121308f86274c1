"""Which gang goes first, and what a gang that cannot go yet holds back.

Gangs compete by priority (the pods' `spec.priority`, resolved from their PriorityClass
at admission), then by their queue's fair share (lowest first, read afresh at each pick,
so the entry charges of gangs admitted earlier in the same round count), then by arrival
(the creation of their oldest member), then by name.

The *head* is the first gang in that order that is complete but does not fit.
- `strict`: the head blocks every gang behind it, so it goes as soon as its room frees.
- `backfill`: gangs behind the head may go, but never onto the nodes kept for the head:
  its best candidate domain (the eligible domain with the most free GPUs, or all its
  eligible nodes when it has no topology). Capacity that frees there is the head's, so
  smaller gangs that keep fitting elsewhere never starve it.
Gangs that are incomplete or whose size is unknown are not candidates for the head:
they could not go anyway, and must not hold capacity they may never use.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Literal

from webhook.controller.core.fitting import NoFit
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import UnitId

Order = Literal["strict", "backfill"]


def queue_order(gangs: Iterable[Gang], queue_of: Callable[[Gang], str] = lambda _: "",
                share: Callable[[str], float] = lambda _: 0.0) -> Iterator[Gang]:
    """The gangs in admission order. Each queue's own gangs keep their order (priority,
    arrival); between queues the next pick compares their first gangs, with the share
    as it stands at that moment."""
    lines: dict[str, list[Gang]] = {}
    for gang in gangs:
        lines.setdefault(queue_of(gang), []).append(gang)
    for line in lines.values():
        line.sort(key=lambda g: (-g.priority, g.arrival, g.id), reverse=True)
    while lines:
        queue = min(lines, key=lambda q: (-lines[q][-1].priority, share(q),
                                          lines[q][-1].arrival, lines[q][-1].id))
        line = lines[queue]
        yield line.pop()
        if not line:
            del lines[queue]


class HeadOfLine:
    """The first gang of a round that is complete but does not fit, and the nodes kept
    for it: what gangs behind it may not take (`backfill`), or that they wait behind
    (`strict`)."""

    def __init__(self, order: Order) -> None:
        self.order = order
        self.head: UnitId | None = None
        self.kept: set[str] = set()

    def behind(self) -> str | None:
        """Why the next gang may not even try (strict order behind a head), or None."""
        if self.head is None or self.order != "strict":
            return None
        return f"behind {self.head}, first in the queue"

    def did_not_fit(self, gang: Gang, outcome: NoFit) -> None:
        if self.head is None:
            self.head = gang.id
            self.kept.update(outcome.best_domain_nodes)
