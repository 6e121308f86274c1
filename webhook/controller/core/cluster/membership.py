"""Who belongs with whom: each unit's active members (a gang's, or a queued single pod's
itself), the gangs' members that succeeded or are being deleted, which members still
carry Airlock's gate or were let go and are not bound yet (the units a round has
something to decide for), and the pods carrying records the controller did not write. One of
the tracked cluster's indexes (`tracking`); it owns its data, and builds a `Gang` again
only when one of its members changed."""

from __future__ import annotations

from collections import Counter

from webhook.controller.core.gangs import Gang, gang_of, membership
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.pods import PodInfo


class Membership:
    def __init__(self) -> None:
        self.members: dict[UnitId, dict[PodKey, PodInfo]] = {}
        # Of gangs: members that succeeded, and members being deleted.
        self.succeeded: Counter[UnitId] = Counter()
        self.deleting: Counter[UnitId] = Counter()
        # Members that still carry Airlock's gate.
        self.gated: set[PodKey] = set()
        # Members let go pinned to one node and not bound yet: a round is due for them
        # while nothing is gated too, since their node may fail them (`placement.pins`).
        self.pinned: set[PodKey] = set()
        # Per unit, its members gated or let go but not bound yet: what a round decides
        # for, or holds room for. The rest run, and a round need not look at them.
        self._pending: Counter[UnitId] = Counter()
        # Those units in order, kept until one comes or goes: thousands may wait, and
        # every round reads them.
        self._pending_order: list[UnitId] | None = None
        # Gangs a member of which came, went or changed since their one reader (the
        # queues' accounts) last asked: it keeps what it derives from gangs (who is short
        # of members, who runs to teach a run time) current from these, not from a pass
        # over every gang.
        self._changed: set[UnitId] = set()
        # Active pods carrying records the controller did not write (`Recorded.distrusted`).
        self.distrusted: set[PodKey] = set()
        self._gangs: dict[UnitId, Gang] = {}

    def put(self, pod: PodInfo) -> None:
        key = pod.key
        unit = membership(pod) if pod.active else None
        if unit is not None:
            self.members.setdefault(unit, {})[key] = pod
            self._gangs.pop(unit, None)
            if pod.gated:
                self.gated.add(key)
            elif not pod.node_name and pod.constraints.pinned is not None:
                self.pinned.add(key)
            if pod.gated or not pod.node_name:
                self._pending[unit] += 1
                self._pending_order = None
        if pod.recorded.distrusted and pod.active:
            self.distrusted.add(key)
        self._count(pod, 1)

    def forget(self, pod: PodInfo) -> None:
        key = pod.key
        self.distrusted.discard(key)
        unit = membership(pod) if pod.active else None
        if unit is not None:
            members = self.members[unit]
            del members[key]
            self._gangs.pop(unit, None)
            if not members:
                del self.members[unit]
            self.gated.discard(key)
            self.pinned.discard(key)
            if pod.gated or not pod.node_name:
                self._drop(self._pending, unit)
                self._pending_order = None
        self._count(pod, -1)

    @staticmethod
    def _drop(counts: Counter[UnitId], unit: UnitId) -> None:
        counts[unit] -= 1
        if not counts[unit]:
            del counts[unit]

    def _count(self, pod: PodInfo, sign: int) -> None:
        gang = pod.gang_id
        if gang is not None:
            unit = UnitId.of_gang(gang)
            self._changed.add(unit)
            if pod.succeeded:
                self.succeeded[unit] += sign
            if pod.deleting:
                self.deleting[unit] += sign

    def gangs(self) -> dict[UnitId, Gang]:
        """Every unit with an active member; built again only for those that changed."""
        cache = self._gangs
        for unit, members in self.members.items():
            if unit not in cache:
                cache[unit] = gang_of(unit, members.values())
        return dict(cache)

    def changed(self) -> set[UnitId]:
        """The gangs changed since the last time this was asked (all, the first time)."""
        found, self._changed = self._changed, set()
        return found

    def pending(self) -> list[Gang]:
        """The units with members gated, or let go and not bound yet, by id."""
        order = self._pending_order
        if order is None:
            order = self._pending_order = sorted(self._pending)
        found = []
        for unit in order:
            gang = self.gang(unit)
            assert gang is not None  # a pending unit has members
            found.append(gang)
        return found

    def gang(self, unit: UnitId) -> Gang | None:
        members = self.members.get(unit)
        if members is None:
            return None
        found = self._gangs.get(unit)
        if found is None:
            found = self._gangs[unit] = gang_of(unit, members.values())
        return found
