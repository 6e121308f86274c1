"""Who belongs with whom: each unit's active members (a gang's, or a queued single pod's
itself), the gangs' members that succeeded or are being deleted, which members still
carry Airlock's gate, and the pods carrying records the controller did not write. One of
the tracked cluster's indexes (`tracking`); it owns its data, and builds a `Gang` again
only when one of its members changed."""

from __future__ import annotations

from collections import Counter

from webhook.controller.core.gangs import Gang, gang_of, membership
from webhook.controller.core.identities import PodKey, UnitId
from webhook.controller.core.objects import PodInfo


class Membership:
    def __init__(self) -> None:
        self.members: dict[UnitId, dict[PodKey, PodInfo]] = {}
        # Of gangs: members that succeeded, and members being deleted.
        self.succeeded: Counter[UnitId] = Counter()
        self.deleting: Counter[UnitId] = Counter()
        # Members that still carry Airlock's gate.
        self.gated: set[PodKey] = set()
        # Active pods carrying records the controller did not write (`PodInfo.distrusted`).
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
        if pod.distrusted and pod.active:
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
        self._count(pod, -1)

    def _count(self, pod: PodInfo, sign: int) -> None:
        gang = pod.gang_id
        if gang is not None:
            unit = UnitId.of_gang(gang)
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

    def gang(self, unit: UnitId) -> Gang | None:
        members = self.members.get(unit)
        if members is None:
            return None
        found = self._gangs.get(unit)
        if found is None:
            found = self._gangs[unit] = gang_of(unit, members.values())
        return found
