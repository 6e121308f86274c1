"""The cluster as the watches report it, with what every round reads kept current as pods
and nodes change: each node's free capacity, the GPUs each running pod holds (in total
per namespace too), the pods on each node, gang membership, and which nodes each kind of
pod may use. A round then costs what it decides, not what the cluster holds: at 50,000
pods, rebuilding these from every pod took most of a round.

Pure and synchronous: the controller's cache feeds it from the watches, the simulation
from its virtual clock, `Tracked.of` from lists. A round reads it through a `Snapshot`
and never changes it; a node's free map is replaced, never changed in place, so a
snapshot's copy of the maps stays what the round started from.

GPUs are GPU-equivalents of the policy's accelerators, plus any accelerator the webhook
recorded on a gang member admitted under an earlier policy."""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.costs import Costs, Holding
from webhook.controller.core.gangs import Gang, GangId, gang_of, membership
from webhook.controller.core.matching import eligible, signature
from webhook.controller.core.objects import NodeInfo, PodInfo, Resources

PodKey = tuple[str, str]


class Room:
    """Free GPUs on a set of nodes: their total, and how many nodes have each amount
    free. Kept as nodes change, it tells whether a gang could pack there in a look at
    the few distinct amounts, not at every node."""

    __slots__ = ("counts", "total")

    def __init__(self, free: Iterable[GpuEquivalents] = ()) -> None:
        self.total: GpuEquivalents = 0
        self.counts: dict[GpuEquivalents, int] = {}
        for amount in free:
            if amount > 0:
                self.total += amount
                self.counts[amount] = self.counts.get(amount, 0) + 1

    def copy(self) -> Room:
        room = Room()
        room.total, room.counts = self.total, dict(self.counts)
        return room

    def moved(self, before: GpuEquivalents, after: GpuEquivalents) -> None:
        """A node of the set went from `before` free GPUs to `after`."""
        before, after = max(before, 0), max(after, 0)
        if before == after:
            return
        self.total += after - before
        if before:
            self.counts[before] -= 1
        if after:
            self.counts[after] = self.counts.get(after, 0) + 1

    def could_pack(self, sizes: Sequence[GpuEquivalents]) -> bool:
        """Whether pods of `sizes` GPUs (largest first) could go on these nodes, counting
        GPUs only: a necessary condition. Each pod takes the first node with room, most
        free first; no pod ever needs more than one node of any amount per pod."""
        left: list[GpuEquivalents] = []
        for amount in sorted((a for a, c in self.counts.items() if c > 0), reverse=True):
            left.extend([amount] * min(self.counts[amount], len(sizes)))
        for size in sizes:
            for i, room in enumerate(left):
                if room >= size:
                    left[i] = room - size
                    break
            else:
                return False
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Room) and (self.total, {a: c for a, c in self.counts.items()
                                                         if c}) == \
            (other.total, {a: c for a, c in other.counts.items() if c})

    __hash__ = None  # type: ignore[assignment]


def with_pod_slot(requests: Resources) -> Resources:
    return {**requests, "pods": 1}


def _minus(allocatable: Resources, used: Resources | None) -> Resources:
    if not used:
        return allocatable
    free = dict(allocatable)
    for k, v in used.items():
        free[k] = free.get(k, 0) - v
    return free


def _placement_changed(old: NodeInfo, new: NodeInfo) -> bool:
    """Whether a node update can change which pods may use the node (a heartbeat
    cannot)."""
    return (old.labels != new.labels or old.taints != new.taints or old.ready != new.ready
            or old.unschedulable != new.unschedulable or old.allocatable != new.allocatable)


class Tracked:
    def __init__(self, accelerators: Accelerators) -> None:
        self._policy = accelerators
        self._recorded: Counter[str] = Counter()
        self.accelerators = accelerators
        self.gpus = accelerators.count
        self.pods: dict[PodKey, PodInfo] = {}
        self.nodes: dict[str, NodeInfo] = {}
        # What bound, active pods request per node name (the pod slot included), whether
        # the node is known or not: a node that comes back finds its pods counted.
        self._used: dict[str, Resources] = {}
        self.free: dict[str, Resources] = {}
        self.free_gpu: dict[str, GpuEquivalents] = {}
        # GPUs of every ready node.
        self.capacity: GpuEquivalents = 0
        # GPU-equivalents each bound, active pod holds (those holding any), and their
        # totals per namespace.
        self.held: dict[PodKey, GpuEquivalents] = {}
        self.namespace_gpus: dict[str, GpuEquivalents] = {}
        self.on_node: dict[str, set[PodKey]] = {}
        # Node -> (priority, start, GPUs, pod, checkpoint) of each pod holding GPUs
        # there, lowest priority first: where evicting below a priority could make room,
        # and what it would cost, without a look at every pod.
        self.holding: dict[str, list[Holding]] = {}
        # (priority, GPUs) -> per node, and in all, how many pods of those GPUs would fit
        # were every started pod below that priority gone: asked by preemption, kept as
        # nodes change, so a gang with no hope of room anywhere is told in one look.
        self._room_parts: dict[tuple[int, GpuEquivalents], dict[str, int]] = {}
        self._room_totals: dict[tuple[int, GpuEquivalents], int] = {}
        # What evicting on a set of nodes would cost (`costs`), per name the caller
        # gives the set and namespaces it spares, and node -> the names of sets it is in.
        self._costs: dict[tuple[object, ...], Costs] = {}
        self._costs_on: dict[str, set[tuple[object, ...]]] = {}
        # Active gang members, queued single pods not bound yet as gangs of one
        # (`membership`); gang members that succeeded, and members being deleted.
        self.members: dict[GangId, dict[PodKey, PodInfo]] = {}
        self.succeeded: Counter[GangId] = Counter()
        self.deleting: Counter[GangId] = Counter()
        # Those members that still carry Airlock's gate.
        self.gated: set[PodKey] = set()
        # Active pods carrying records the controller did not write (`PodInfo.distrusted`).
        self.distrusted: set[PodKey] = set()
        self._gangs: dict[GangId, Gang] = {}
        self._eligible: dict[tuple[Any, ...], list[str]] = {}
        self._eligible_sets: dict[tuple[Any, ...], frozenset[str]] = {}
        self._domains: dict[tuple[Any, ...], dict[str, list[str]]] = {}
        self._capacities: dict[tuple[Any, ...], list[tuple[GpuEquivalents, GpuEquivalents]]] = {}
        self._domain_rooms: dict[tuple[Any, ...], dict[str, Room]] = {}

    @classmethod
    def of(cls, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo],
           accelerators: Accelerators) -> Tracked:
        tracked = cls(accelerators)
        for node in nodes:
            tracked.put_node(node)
        for pod in pods:
            tracked.put_pod(pod)
        return tracked

    # --- what counts as a GPU -------------------------------------------------------

    def count_as(self, accelerators: Accelerators) -> None:
        """Count the policy's `accelerators` from now on (a policy reload)."""
        if accelerators != self._policy:
            self._policy = accelerators
            self._recount()

    def _recount(self) -> None:
        self.accelerators = self._policy.including(n for n, c in self._recorded.items() if c)
        self.gpus = gpus = self.accelerators.count
        self.free_gpu = {n: gpus(free) for n, free in self.free.items()}
        self._domain_rooms.clear()
        self.capacity = sum(gpus(n.allocatable) for n in self.nodes.values() if n.ready)
        self.held, self.namespace_gpus, self.holding = {}, {}, {}
        for pod in self.pods.values():
            if pod.node_name and pod.active:
                self._hold(pod, pod.node_name, gpus(pod.requests))
        self._room_parts.clear()
        self._room_totals.clear()
        self._costs.clear()
        self._costs_on.clear()

    def _hold(self, pod: PodInfo, node: str, amount: GpuEquivalents) -> None:
        if amount:
            key = pod.key
            self.held[key] = amount
            self.namespace_gpus[key[0]] = self.namespace_gpus.get(key[0], 0) + amount
            bisect.insort(self.holding.setdefault(node, []),
                          (pod.priority, pod.started, amount, key, pod.checkpointed))

    # --- pods ---------------------------------------------------------------------------

    def put_pod(self, pod: PodInfo) -> None:
        key = pod.key
        old = self.pods.get(key)
        if old is not None:
            if old == pod:
                return
            self._forget(old)
        self.pods[key] = pod
        new_names = False
        for name in pod.accelerators:
            self._recorded[name] += 1
            new_names |= name not in self.accelerators.names
        if pod.node_name and pod.active:
            self._use(pod.node_name, with_pod_slot(pod.requests), 1)
            self.on_node.setdefault(pod.node_name, set()).add(key)
            if not new_names:
                self._hold(pod, pod.node_name, self.gpus(pod.requests))
            self._touched(pod.node_name)
        member_of = membership(pod) if pod.active else None
        if member_of is not None:
            self.members.setdefault(member_of, {})[key] = pod
            self._gangs.pop(member_of, None)
            if pod.gated:
                self.gated.add(key)
        if pod.distrusted and pod.active:
            self.distrusted.add(key)
        gang = pod.gang_id
        if gang is not None:
            if pod.succeeded:
                self.succeeded[gang] += 1
            if pod.deleting:
                self.deleting[gang] += 1
        if new_names:
            self._recount()

    def drop_pod(self, key: PodKey) -> None:
        old = self.pods.pop(key, None)
        if old is not None:
            self._forget(old)

    def _forget(self, pod: PodInfo) -> None:
        """Take back what `pod` added (it is still in `pods` when replaced)."""
        key = pod.key
        self.pods.pop(key, None)
        self.distrusted.discard(key)
        gone_names = False
        for name in pod.accelerators:
            self._recorded[name] -= 1
            gone_names |= not self._recorded[name]
        if pod.node_name and pod.active:
            self._use(pod.node_name, with_pod_slot(pod.requests), -1)
            on = self.on_node.get(pod.node_name)
            if on is not None:
                on.discard(key)
                if not on:
                    del self.on_node[pod.node_name]
            amount = self.held.pop(key, 0)
            if amount:
                self.namespace_gpus[key[0]] -= amount
                holding = self.holding[pod.node_name]
                holding.remove((pod.priority, pod.started, amount, key, pod.checkpointed))
                if not holding:
                    del self.holding[pod.node_name]
            self._touched(pod.node_name)
        member_of = membership(pod) if pod.active else None
        if member_of is not None:
            members = self.members[member_of]
            del members[key]
            self._gangs.pop(member_of, None)
            if not members:
                del self.members[member_of]
            self.gated.discard(key)
        gang = pod.gang_id
        if gang is not None:
            if pod.succeeded:
                self.succeeded[gang] -= 1
            if pod.deleting:
                self.deleting[gang] -= 1
        if gone_names:
            self._recount()

    def _use(self, node: str, requests: Resources, sign: int) -> None:
        used = self._used.setdefault(node, {})
        for k, v in requests.items():
            used[k] = used.get(k, 0) + sign * v
        info = self.nodes.get(node)
        if info is not None:
            # A new map, not a change to the old one: a snapshot may hold the old one.
            free = self.free[node] = dict(self.free[node])
            for k, v in requests.items():
                free[k] = free.get(k, 0) - sign * v
            before = self.free_gpu[node]
            self.free_gpu[node] = after = self.gpus(free)
            self.domain_rooms_moved(self._domain_rooms, node, before, after)

    # --- nodes --------------------------------------------------------------------------

    def put_node(self, node: NodeInfo) -> None:
        name = node.name
        old = self.nodes.get(name)
        if old == node:
            return
        self.nodes[name] = node
        if old is None or old.allocatable != node.allocatable:
            free = self.free[name] = _minus(node.allocatable, self._used.get(name))
            self.free_gpu[name] = self.gpus(free)
        self.capacity += self._ready_gpus(node) - (self._ready_gpus(old) if old else 0)
        self._touched(name)
        if old is None or _placement_changed(old, node):
            self._placements_changed()

    def drop_node(self, name: str) -> None:
        old = self.nodes.pop(name, None)
        if old is None:
            return
        del self.free[name], self.free_gpu[name]
        self.capacity -= self._ready_gpus(old)
        self._touched(name)
        self._placements_changed()

    def _ready_gpus(self, node: NodeInfo) -> GpuEquivalents:
        return self.gpus(node.allocatable) if node.ready else 0

    def _placements_changed(self) -> None:
        self._eligible.clear()
        self._eligible_sets.clear()
        self._domains.clear()
        self._capacities.clear()
        self._domain_rooms.clear()
        self._costs.clear()
        self._costs_on.clear()

    def _room_below(self, node: str, priority: int) -> GpuEquivalents:
        if node not in self.nodes:
            return 0
        room = max(self.free_gpu[node], 0)
        for below, started, gpus, _, _ in self.holding.get(node, ()):
            if below >= priority:
                break
            if started:
                room += gpus
        return room

    def _touched(self, node: str) -> None:
        """Keep the room below each priority asked about current for `node`, and forget
        the costs of evicting on sets of nodes that hold it."""
        for key in self._costs_on.pop(node, ()):
            self._costs.pop(key, None)
        for (priority, size), parts in self._room_parts.items():
            now = self._room_below(node, priority) // size
            before = parts.pop(node, 0)
            if now:
                parts[node] = now
            self._room_totals[priority, size] += now - before

    # --- what rounds read -----------------------------------------------------------

    def room_below(self, priority: int, size: GpuEquivalents) -> int:
        """How many pods of `size` GPUs the nodes could take, each on one node, were
        every started pod below `priority` gone: an upper bound on what preemption could
        ever make room for (eligibility, minimum runtimes and budgets not weighed)."""
        key = priority, size
        total = self._room_totals.get(key)
        if total is None:
            parts = {n: fit for n in self.nodes if (fit := self._room_below(n, priority) // size)}
            self._room_parts[key] = parts
            total = self._room_totals[key] = sum(parts.values())
        return total

    def costs(self, name: tuple[object, ...], nodes: Sequence[str], spared: frozenset[str]
              ) -> Costs:
        """What evicting pods on `nodes` (a set the caller names, e.g. a domain), but
        those in a `spared` namespace, would cost; built again once a pod there changes."""
        key = (*name, spared)
        found = self._costs.get(key)
        if found is None:
            holding = self.holding
            found = self._costs[key] = Costs(
                h for n in nodes for h in holding.get(n, ()) if h[3][0] not in spared)
            for n in nodes:
                self._costs_on.setdefault(n, set()).add(key)
        return found

    def gangs(self) -> dict[GangId, Gang]:
        """Every gang with an active member; built again only for gangs that changed."""
        cache = self._gangs
        for gang_id, members in self.members.items():
            if gang_id not in cache:
                cache[gang_id] = gang_of(gang_id, members.values())
        return dict(cache)

    def gang(self, gang_id: GangId) -> Gang | None:
        members = self.members.get(gang_id)
        if members is None:
            return None
        found = self._gangs.get(gang_id)
        if found is None:
            found = self._gangs[gang_id] = gang_of(gang_id, members.values())
        return found

    def eligible_nodes(self, pod: PodInfo) -> list[str]:
        """Nodes the pod may use at all; cached per scheduling signature, since the pods
        of a gang, and of many gangs, mostly share one, until a node changes."""
        sig = signature(pod)
        found = self._eligible.get(sig)
        if found is None:
            found = [n for n, info in self.nodes.items() if eligible(pod, info)]
            self._eligible[sig] = found
        return found

    def eligible_set(self, pod: PodInfo) -> frozenset[str]:
        sig = signature(pod)
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self.eligible_nodes(pod))
        return found

    def eligible_sets_by(self, sig: tuple[Any, ...]) -> frozenset[str]:
        """The eligible nodes of a signature already asked about this round."""
        found = self._eligible_sets.get(sig)
        if found is None:
            found = self._eligible_sets[sig] = frozenset(self._eligible[sig])
        return found

    def domains(self, pod: PodInfo, topology_key: str) -> dict[str, list[str]]:
        """The pod's eligible nodes by their value of the topology label."""
        key = (signature(pod), topology_key)
        found = self._domains.get(key)
        if found is None:
            found = {}
            nodes = self.nodes
            for name in self.eligible_nodes(pod):
                value = nodes[name].labels.get(topology_key)
                if value is not None:
                    found.setdefault(value, []).append(name)
            self._domains[key] = found
        return found

    def domain_rooms(self, pod: PodInfo, topology_key: str) -> dict[str, Room]:
        """The free GPUs of each domain over the pod's eligible nodes, kept current as
        pods come and go (a round copies what it reads: summing every node per round was
        most of a round in a simulation of thousands of nodes)."""
        key = (signature(pod), topology_key)
        found = self._domain_rooms.get(key)
        if found is None:
            free_gpu = self.free_gpu
            found = self._domain_rooms[key] = {
                name: Room(free_gpu[n] for n in nodes)
                for name, nodes in self.domains(pod, topology_key).items()}
        return found

    def domain_rooms_moved(self, rooms: dict[tuple[Any, ...], dict[str, Room]], node: str,
                           before: GpuEquivalents, after: GpuEquivalents) -> None:
        """`node` went from `before` free GPUs to `after`, in the domain `rooms` it is in."""
        if max(before, 0) == max(after, 0):
            return
        labels = self.nodes[node].labels
        for (sig, key), by_domain in rooms.items():
            value = labels.get(key)
            if value is not None and node in self.eligible_sets_by(sig):
                by_domain[value].moved(before, after)

    def capacities(self, pod: PodInfo, topology_key: str | None
                   ) -> list[tuple[GpuEquivalents, GpuEquivalents]]:
        """What the pod's eligible nodes have, used or not, per domain of the topology
        label (all of them as one, without a label): the GPUs of each domain's nodes and
        of its largest node, most GPUs first. No wait can get a gang more."""
        key = (signature(pod), topology_key)
        found = self._capacities.get(key)
        if found is None:
            nodes, gpus = self.nodes, self.gpus
            groups = ([self.eligible_nodes(pod)] if topology_key is None
                      else self.domains(pod, topology_key).values())
            found = []
            for names in groups:
                sizes = [gpus(nodes[n].allocatable) for n in names]
                found.append((sum(sizes), max(sizes, default=0)))
            found.sort(reverse=True)
            self._capacities[key] = found
        return found
