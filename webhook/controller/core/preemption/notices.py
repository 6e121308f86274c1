"""The checkpoint handshake: which of a preemption's victims go now, and which are told
first and given until a deadline to save their work.

With `checkpointGrace` in policy, a victim is told (`notice`) when the preemption is
decided, at the record's time. It goes as soon as it answers, each of its pods stating a
checkpoint made since then, or when the deadline passes; one that exits is gone by
itself. The preemptor's room is held all the while, so nothing else takes what the
victims will free.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from webhook.controller.core.actions import Victim


def deadline(noticed_at: float, grace: float) -> float:
    """When a victim told at `noticed_at` is evicted whether it answered or not."""
    return noticed_at + grace


def answered(victim: Victim, noticed_at: float) -> bool:
    """Whether every pod of the victim has stated a checkpoint made since its notice (in
    the notice's second or after: RFC 3339 times are often stated to the second). Every
    pod, as the work lost is counted pod by pod: one that has not saved would lose it."""
    since = math.floor(noticed_at)
    return all(p.checkpointed is not None and p.checkpointed >= since for p in victim.pods)


def due(victims: Sequence[Victim], noticed_at: float, grace: float, now: float
        ) -> tuple[tuple[Victim, ...], tuple[Victim, ...]]:
    """The victims to evict now, and those told and still given time."""
    if grace <= 0 or now >= deadline(noticed_at, grace):
        return tuple(victims), ()
    going = tuple(v for v in victims if answered(v, noticed_at))
    return going, tuple(v for v in victims if not answered(v, noticed_at))
