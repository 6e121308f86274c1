"""Backfill that never delays the head (EASY backfill): a gang behind the head of the queue
may use the room reserved for the head when it is expected to end before the head could
start anyway.

The head's expected start (its *shadow time*) is when the pods running on its reserved nodes
are expected to have freed enough for it: each ends at its start plus its expected run
time (`runtimes`: what it states, else what its namespace and class learned). They are taken
soonest end first until the reserved nodes would have the head's GPUs free, and a slot for
each of its pods on single nodes. Those are necessary conditions, not a packing: the
shadow time is never later than the head's real start, so a backfill judged to end in
time does. A pod whose end cannot be known (no run time stated or learned) before enough
has freed makes the head's start unknown, and then nothing is backfilled onto its room.

EASY's second rule lends what the head would not need even at its start, to a gang of
any run time: the reserved nodes its packing at the shadow time leaves alone (`spare`: its
pods, largest first, each onto the kept node with the most room then). Whole nodes,
since the scheduler places pods on nodes, not on GPUs: whatever runs there, for however
long, takes nothing the head counts on. A sliced head lends nothing (its packing is per
slice domain).

A gang backfilled onto reserved room records when it is expected to end; past then it is the
first victim when the head is ready (`criteria`). Pure, the clock passed in."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import NamedTuple

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.snapshot import Snapshot
from webhook.controller.core.gangs import Gang
from webhook.controller.core.identities import PodKey
from webhook.controller.core.placement.runtimes import Runtimes, key_of
from webhook.controller.core.pods import PodInfo

# A pod running on a kept node: when it is expected to end (None: unknown), its node, and
# the GPUs it frees there.
Ending = tuple[float | None, str, GpuEquivalents]
# A pod a forecast started on a node: when it is expected to end, its key, its GPUs.
Placed = tuple[float | None, PodKey, GpuEquivalents]


class Shadow(NamedTuple):
    """When the head could start, and each kept node's free GPUs then."""

    at: float
    room: dict[str, GpuEquivalents]


def shadow(need: GpuEquivalents, shape: tuple[int, GpuEquivalents],
           free: Mapping[str, GpuEquivalents], ends: Iterable[Ending], now: float
           ) -> Shadow | None:
    """When a gang needing `need` GPUs, as `shape` (pods, GPUs of the smallest), could
    start on the nodes `free` says, once the pods `ends` lists end as expected; None
    when a pod of unknown end is in the way, or the nodes are never enough."""
    count, smallest = shape
    room = dict(free)
    total = sum(room.values())

    def slots(gpus: GpuEquivalents) -> int:
        return int(max(gpus, 0) // smallest) if smallest > 0 else count

    free_slots = sum(slots(r) for r in room.values())
    if total >= need and free_slots >= count:
        return Shadow(now, room)
    for end, node, gpus in sorted(ends, key=lambda e: (e[0] is None, e[0] or 0.0)):
        if end is None:
            return None
        before = room[node]
        room[node] = before + gpus
        total += gpus
        free_slots += slots(room[node]) - slots(before)
        if total >= need and free_slots >= count:
            return Shadow(max(end, now), room)
    return None


def spare(room: Mapping[str, GpuEquivalents], sizes: Sequence[GpuEquivalents]
          ) -> frozenset[str]:
    """The nodes of `room` a gang of pods of `sizes` GPUs would leave alone: its pods,
    largest first, each onto the node with the most room (ties by name); none when
    they do not pack."""
    left = dict(room)
    order = sorted(left, key=lambda n: (-left[n], n))
    used: set[str] = set()
    for size in sorted(sizes, reverse=True):
        node = next((n for n in order if left[n] >= size), None)
        if node is None:
            return frozenset()
        left[node] -= size
        used.add(node)
    return frozenset(left) - used


class Backfill:
    """What a round knows of expected ends: the head's start, and a backfill's end."""

    def __init__(self, snap: Snapshot, runtimes: Runtimes, queue_of: Callable[[str], str],
                 now: float, spared: frozenset[str] = frozenset()) -> None:
        self.snap = snap
        self.runtimes = runtimes
        self.queue_of = queue_of
        self.now = now
        # Namespaces out of Airlock's scope: the webhook never saw their pods, so what
        # they carry under Airlock's keys is nobody's word but their creator's.
        self.spared = spared
        # Pods a forecast has seen end (`forecasting`): their room is free already.
        self.gone: Collection[PodKey] = frozenset()
        # Pods a forecast started, which the cluster does not hold: per node, each one's
        # expected end (None: unknown), key and GPUs. The head's start waits for them too.
        self.placed: Mapping[str, Sequence[Placed]] = {}

    def until(self, pods: Sequence[PodInfo], stretch: float = 1.0, gang: Gang | None = None
              ) -> float | None:
        """When `pods` (of `gang`, if given), admitted now, are expected to end, their run
        time `stretch`ed (an elastic gang that may run with a part of its pods runs
        longer); None when nobody knows."""
        if not pods:
            return None
        # All of a gang: what its members state is kept with it.
        runtime = self.runtimes.expected_of(gang.stated_runtime, pods[0]) \
            if gang is not None and gang.whole(pods) else self.runtimes.expected(pods)
        return None if runtime is None else self.now + runtime * stretch

    def _end(self, pod: PodInfo) -> float | None:
        if pod.namespace in self.spared:
            return None
        runtime = pod.marks.runtime
        if runtime is None:
            runtime = self.runtimes.estimate(key_of(pod))
        if runtime is None:
            return None
        # Not started yet: it starts now at the soonest. Past its expected end: it ends
        # now at the soonest. Either way no later than it really will.
        return max((pod.started or self.now) + runtime, self.now)

    def start(self, members: Sequence[PodInfo], free: Mapping[str, GpuEquivalents],
              gang: Gang | None = None) -> Shadow | None:
        """The shadow time of a head of `members` (of `gang`, if given: it keeps their
        GPUs) on the reserved nodes, which had `free` GPUs when it became the head, and
        their room then."""
        snap = self.snap
        cluster = snap.cluster
        holding, pods = cluster.occupancy.holders, cluster.pods
        ends = [(self._end(pods[h.pod]), node, h.gpus)
                for node in free for h in holding.get(node, ()) if h.pod not in self.gone]
        ends += [(end, node, gpus) for node in free
                 for end, key, gpus in self.placed.get(node, ()) if key not in self.gone]
        sizes: Sequence[GpuEquivalents]
        if gang is not None and gang.whole(members):
            need, sizes = snap.unit_need(gang, members), gang.sizes(snap.accelerators)
        else:
            sizes = [snap.gpus(p.requests) for p in members]
            need = snap.need(members)
        return shadow(need, (len(sizes), min(sizes, default=0)), free, ends, self.now)
