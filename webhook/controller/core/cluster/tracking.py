"""The cluster as the watches report it, kept current as pods and nodes change, in three
indexes that each own their data: `capacity` (where room is, which nodes each kind of pod
may use), `occupancy` (who holds the GPUs, what evicting them would cost) and `membership`
(who belongs to which gang). A round then costs what it decides, not what the cluster
holds: at 50,000 pods, rebuilding these from every pod took most of a round.

Pure and synchronous: the controller's cache feeds it from the watches, the simulation
from its virtual clock, `Tracked.of` from lists. A round reads it through a `Snapshot`
and never changes it.

GPUs are GPU-equivalents of the policy's accelerators, plus any accelerator the webhook
recorded on a gang member admitted under an earlier policy. Where policy names GPU models,
each node is of the first model whose labels it has, and what pods hold is also counted
per model (`models`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from webhook.accelerators import Accelerators, GpuEquivalents
from webhook.controller.core.cluster.capacity import Capacity, with_pod_slot
from webhook.controller.core.cluster.membership import Membership
from webhook.controller.core.cluster.models import Models
from webhook.controller.core.cluster.occupancy import Occupancy
from webhook.controller.core.identities import PodKey
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.pods import PodInfo
from webhook.policy.gpumodels import GpuModel


class Tracked:
    def __init__(self, accelerators: Accelerators) -> None:
        self._policy = accelerators
        # Accelerators the webhook recorded on pods, by how many pods record each.
        self._recorded: Counter[str] = Counter()
        self.accelerators = accelerators
        self.pods: dict[PodKey, PodInfo] = {}
        self.capacity = Capacity(accelerators.count)
        self.occupancy = Occupancy()
        self.membership = Membership()
        self.models = Models()
        # Active pods whose placement record says they were backfilled onto the room
        # reserved for the head of the queue, and until when: few, asked of every
        # preemption.
        self.backfilled: dict[PodKey, float] = {}
        # Pods marked for deletion that kube-scheduler still counts where they are, and
        # that node: the room they free by themselves.
        self.leaving: dict[PodKey, str] = {}
        # Queued single pods with a placement record that changed since their one reader
        # (the queues' accounts, which learn run times from them) last asked.
        self._singles_changed: set[PodKey] = set()

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
        gpus = self.accelerators.count
        self.capacity.count_as(gpus)
        self.occupancy.clear()
        for pod in self.pods.values():
            if pod.node_name and pod.active:
                self.occupancy.bind(pod, pod.node_name, gpus(pod.requests))
        self.models.recount(self.capacity.nodes.values(), gpus, self.occupancy)

    def sort_models(self, models: Sequence[GpuModel]) -> None:
        """Tell GPU models apart by `models`' node labels from now on (a policy reload)."""
        if self.models.use(models):
            self.models.recount(self.capacity.nodes.values(), self.capacity.gpus,
                                self.occupancy)

    def _recorded_names(self, pod: PodInfo, sign: int) -> bool:
        """Count the accelerators `pod` records; whether what counts as one changed."""
        changed = False
        for name in pod.marks.accelerators:
            self._recorded[name] += sign
            changed |= (name not in self.accelerators.names) if sign > 0 \
                else not self._recorded[name]
        return changed

    # --- pods ---------------------------------------------------------------------------

    def put_pod(self, pod: PodInfo) -> None:
        key = pod.key
        old = self.pods.get(key)
        if old is not None:
            if old == pod:
                return
            self._forget(old)
        self.pods[key] = pod
        new_names = self._recorded_names(pod, 1)
        node, room = pod.node_name, pod.room
        if room and pod.holds_room:
            self.capacity.use(room, with_pod_slot(pod.requests), 1)
            if not pod.active:
                self.leaving[key] = room
            elif node and not new_names:  # the recount binds it
                gpus = self.capacity.gpus(pod.requests)
                self.occupancy.bind(pod, node, gpus)
                self.models.bind(key.namespace, node, gpus)
            self._touched(room)
        self.membership.put(pod)
        if pod.active and pod.recorded.placement is not None and \
                (until := pod.recorded.placement.backfilled_until) is not None:
            self.backfilled[key] = until
        if pod.marks.single and pod.recorded.placement is not None:
            self._singles_changed.add(key)
        if new_names:
            self._recount()

    def changed_singles(self) -> set[PodKey]:
        """Queued single pods with a placement record that changed (or went) since the
        last time this was asked (all, the first time)."""
        found, self._singles_changed = self._singles_changed, set()
        return found

    def drop_pod(self, key: PodKey) -> None:
        old = self.pods.pop(key, None)
        if old is not None:
            self._forget(old)

    def _forget(self, pod: PodInfo) -> None:
        """Take back what `pod` added (it is still in `pods` when replaced)."""
        self.pods.pop(pod.key, None)
        gone_names = self._recorded_names(pod, -1)
        node, room = pod.node_name, pod.room
        if room and pod.holds_room:
            self.capacity.use(room, with_pod_slot(pod.requests), -1)
            if node and pod.active:
                self.models.bind(pod.key.namespace, node,
                                 -self.occupancy.gpus_of.get(pod.key, 0))
                self.occupancy.unbind(pod, node)
            self._touched(room)
        self.membership.forget(pod)
        self.backfilled.pop(pod.key, None)
        self.leaving.pop(pod.key, None)
        if pod.marks.single and pod.recorded.placement is not None:
            self._singles_changed.add(pod.key)
        if gone_names:
            self._recount()

    # --- nodes --------------------------------------------------------------------------

    def put_node(self, node: NodeInfo) -> None:
        placements = self.capacity.placements
        if self.capacity.put_node(node):
            self._touched(node.name, placements)
            self.models.put_node(node, self.capacity.gpus, self.occupancy)

    def drop_node(self, name: str) -> None:
        placements = self.capacity.placements
        if self.capacity.drop_node(name):
            self._touched(name, placements)
            self.models.drop_node(name, self.occupancy)

    def _touched(self, node: str, placements: int | None = None) -> None:
        self.occupancy.touched(node, self.capacity.free_gpu.get(node))
        if placements is not None and placements != self.capacity.placements:
            # The node sets costs were kept for may be other sets now.
            self.occupancy.forget_costs()

    # --- what rounds read ---------------------------------------------------------------

    def room_below(self, priority: int, size: GpuEquivalents) -> int:
        """`Occupancy.room_below` over the nodes there are."""
        return self.occupancy.room_below(priority, size, self.capacity.free_gpu)
