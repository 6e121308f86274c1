"""Gangs broken from outside: a running gang that lost members (kube-scheduler's own
preemption, a node lost, an eviction) holds GPUs it cannot use. Replacements rejoin it
in its domain when they can (`deciding`); a gang still short of members after the grace
period has the rest evicted, so it is requeued and starts again whole. Pure.

When each gang became short is kept in the cluster by the leader (`remembering`), so a
new leader carries the grace period on instead of starting it again."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import UnitId
from webhook.controller.core.records import dump_memory, load_memory


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Since when a gang has been short of members, and which admission it fell short
    of: the `at` of its latest record then. Members that rejoin write a later record, so
    a gang short again after that is short anew, whatever an older leader kept."""

    since: float
    record: float


def short(gangs: Iterable[Gang], done: Mapping[UnitId, int]) -> dict[UnitId, tuple[int, int]]:
    """Gangs admitted whole that now have fewer members running or admitted than their
    size at admission, or than the minimum of an elastic gang (members that succeeded,
    `done`, count as present): id -> (present, size)."""
    found = {}
    for gang in gangs:
        first = gang.records[0] if gang.records else None
        size = None if first is None else first.minimum or first.size
        if size is None:
            continue
        present = len(gang.let_go) + len(gang.promised) + done.get(gang.id, 0)
        if present < size:
            found[gang.id] = (present, size)
    return found


def since(previous: Mapping[UnitId, Shortfall], gang_of: Callable[[UnitId], Gang | None],
          now_short: Iterable[UnitId], now: float) -> dict[UnitId, Shortfall]:
    """When each gang that is short now first was, keeping earlier times of the same
    shortfall. Every gang in `now_short` has a record (`short` says so)."""
    found = {}
    for unit in now_short:
        gang = gang_of(unit)
        assert gang is not None  # a short gang has members
        latest = gang.records[-1].at
        kept = previous.get(unit)
        found[unit] = kept if kept is not None and kept.record == latest else \
            Shortfall(now, latest)
    return found


def dumps(shortfalls: Mapping[UnitId, Shortfall]) -> str:
    return dump_memory("shortSince", {"gangs": {unit.path: {"since": s.since, "record": s.record}
                                         for unit, s in sorted(shortfalls.items())}})


def loads(text: str) -> dict[UnitId, Shortfall]:
    """What a former leader kept; nothing when it is not readable (the grace periods
    then start again: later evictions, never earlier ones)."""
    # Before versions, the gangs were the whole of it.
    memory = load_memory("shortSince", text, legacy=lambda raw: {"gangs": raw})
    if memory is None:
        return {}
    try:
        found = {}
        for key, value in memory["gangs"].items():
            namespace, _, name = key.partition("/")
            found[UnitId("gang", namespace, name)] = Shortfall(float(value["since"]),
                                                               float(value["record"]))
        return found
    except (ValueError, KeyError, TypeError, AttributeError):
        return {}
