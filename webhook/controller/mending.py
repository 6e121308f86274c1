"""Gangs broken from outside: a running gang that lost members (kube-scheduler's own
preemption, a node lost, an eviction) holds GPUs it cannot use. Replacements rejoin it
in its domain when they can (`deciding`); a gang still short of members after the grace
period has the rest evicted, so it is requeued and starts again whole. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from webhook.controller.gangs import Gang, GangId


def short(gangs: Iterable[Gang], done: Mapping[GangId, int]) -> dict[GangId, tuple[int, int]]:
    """Gangs admitted whole that now have fewer members running or admitted than their
    size at admission (members that succeeded, `done`, count as present):
    id -> (present, size)."""
    found = {}
    for gang in gangs:
        size = gang.records[0].size if gang.records else None
        if size is None:
            continue
        present = len(gang.let_go) + len(gang.promised) + done.get(gang.id, 0)
        if present < size:
            found[gang.id] = (present, size)
    return found


def since(previous: Mapping[GangId, float], now_short: Iterable[GangId], now: float
          ) -> dict[GangId, float]:
    """When each gang that is short now first was, keeping earlier times."""
    return {g: previous.get(g, now) for g in now_short}
