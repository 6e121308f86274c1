"""Which GPU model each node is (the first of policy's `gpuModels` whose labels it has),
how many GPUs each model has, and how many the pods of each namespace hold on each: what
quotas per model are charged with. One of the tracked cluster's indexes (`tracking`), kept
as pods and nodes change."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from webhook.accelerators import GpuEquivalents
from webhook.controller.core.cluster.occupancy import Occupancy
from webhook.controller.core.nodes import NodeInfo
from webhook.controller.core.resources import Resources
from webhook.policy.gpumodels import GpuModel, model_of

Count = Callable[[Resources], GpuEquivalents]


class Models:
    def __init__(self) -> None:
        self.models: tuple[GpuModel, ...] = ()
        self.of_node: dict[str, str] = {}
        self.nodes: dict[str, set[str]] = {}
        # The GPUs of each model's ready nodes, and each such node's part of them.
        self.total: dict[str, GpuEquivalents] = {}
        self._counted: dict[str, GpuEquivalents] = {}
        # Model -> namespace -> the GPUs its bound, active pods hold on the model's nodes.
        self.held: dict[str, dict[str, GpuEquivalents]] = {}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(m.name for m in self.models)

    def labels(self, model: str) -> dict[str, str]:
        """What pins a pod to the model's nodes."""
        return next(dict(m.node_labels) for m in self.models if m.name == model)

    def use(self, models: Sequence[GpuModel]) -> bool:
        """Whether `models` differ from those in use (all is to be counted again)."""
        models = tuple(models)
        if models == self.models:
            return False
        self.models = models
        return True

    def recount(self, nodes: Iterable[NodeInfo], gpus: Count, occupancy: Occupancy) -> None:
        self.of_node, self.nodes, self.total, self._counted, self.held = {}, {}, {}, {}, {}
        if not self.models:
            return
        for node in nodes:
            self.put_node(node, gpus, occupancy)

    def put_node(self, node: NodeInfo, gpus: Count, occupancy: Occupancy) -> None:
        if not self.models:
            return
        name = node.name
        old, new = self.of_node.get(name), model_of(self.models, node.labels, node.devices)
        if old is not None:
            self.total[old] -= self._counted.pop(name, 0)
        if new is not None:
            counted = gpus(node.allocatable) if node.ready else 0
            self._counted[name] = counted
            self.total[new] = self.total.get(new, 0) + counted
        if old == new:
            return
        self._held_on(name, occupancy, -1)
        if old is not None:
            self.nodes[old].discard(name)
            del self.of_node[name]
        if new is not None:
            self.nodes.setdefault(new, set()).add(name)
            self.of_node[name] = new
        self._held_on(name, occupancy, 1)

    def drop_node(self, name: str, occupancy: Occupancy) -> None:
        old = self.of_node.get(name)
        if old is None:
            return
        self._held_on(name, occupancy, -1)
        self.total[old] -= self._counted.pop(name, 0)
        self.nodes[old].discard(name)
        del self.of_node[name]

    def bind(self, namespace: str, node: str, gpus: GpuEquivalents) -> None:
        """A pod of `namespace` holds `gpus` more (or, negative, fewer) on `node`."""
        model = self.of_node.get(node)
        if model is not None and gpus:
            held = self.held.setdefault(model, {})
            left = held.get(namespace, 0) + gpus
            if left:
                held[namespace] = left
            else:
                held.pop(namespace, None)

    def _held_on(self, node: str, occupancy: Occupancy, sign: int) -> None:
        for key in occupancy.on_node.get(node, ()):
            self.bind(key.namespace, node, sign * occupancy.gpus_of.get(key, 0))
