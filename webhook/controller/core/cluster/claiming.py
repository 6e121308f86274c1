"""Pods' DRA claims and nodes' ResourceSlices, as the watches report them: what each pod's
claims ask for, and what each node's slices offer, by the resource each DeviceClass the
policy maps counts as (`webhook.devices`). The controller's cache adds these to pods'
requests and nodes' allocatable, so fit, quotas, fair share and preemption count DRA GPUs
as they count extended resources; this index says which pods and nodes to count again
when a claim, a template or a slice changes.

- A pod's claims come from its templates (one claim made per pod) or name a ResourceClaim,
  which several pods may share: that one counts once, on the first of its pods by name.
- A claim or template not seen yet counts nothing until it is; the pods that name it are
  counted again then.
- `All` counts the most devices of its class any node offers.
- A node offers what its slices hold, each pool at its newest generation, and the pairs
  of devices policy keeps aligned (a GPU and a NIC under one PCIe root) that are free
  (`webhook.devices.alignment`): its claims' allocations say which devices are taken.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.controller.core.identities import PodKey
from webhook.controller.core.resources import Resources
from webhook.devices.alignment import (
    DeviceId,
    PairedDevice,
    allocated,
    free_pairs,
    pair_kinds,
    paired_devices,
)
from webhook.devices.claims import Ask, ClaimKind, asks_of, claim_spec, demand, named
from webhook.devices.kinds import DeviceKind
from webhook.devices.slices import (
    DeviceAttributes,
    counts,
    gpu_attributes,
    merged,
    node_of,
    pool_of,
)
from webhook.policy.gpumodels import GpuModel, claimed_models

# A claim or template: its namespace, kind and name.
ClaimRef = tuple[str, ClaimKind, str]


@dataclass(frozen=True, slots=True)
class _Slice:
    node: str
    pool: tuple[str, str]
    generation: int
    offers: Resources
    paired: tuple[PairedDevice, ...] = ()
    gpu_attributes: DeviceAttributes = field(default_factory=dict)


SliceEntry = tuple[str, _Slice | None]


def _name(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


# A claim or template: what it asks for, and the devices allocated to it.
ClaimEntry = tuple[ClaimRef, tuple[Ask, ...], tuple[DeviceId, ...]]


def claim_entry(kind: ClaimKind, obj: Mapping[str, Any]) -> ClaimEntry:
    """A claim or template as the index keeps it: what it asks for, and (a claim) the
    devices the scheduler allocated to it."""
    namespace, name = _name(obj)
    template = kind == "ResourceClaimTemplate"
    return ((namespace, kind, name), asks_of(claim_spec(obj, template=template)),
            () if template else allocated(obj))


def refs_of(namespace: str, raw_pod: Mapping[str, Any]) -> tuple[ClaimRef, ...]:
    """The claims and templates a pod names."""
    return tuple((namespace, kind, name) for kind, name in named(raw_pod.get("spec")))


class DeviceIndex:
    def __init__(self, kinds: Mapping[str, DeviceKind]) -> None:
        self.kinds = kinds
        self._asks: dict[ClaimRef, tuple[Ask, ...]] = {}
        self._refs: dict[PodKey, tuple[ClaimRef, ...]] = {}
        self._users: dict[ClaimRef, set[PodKey]] = {}
        self._slices: dict[str, _Slice] = {}
        self._on_node: dict[str, set[str]] = {}
        # What each node's slices offer; and the most any node offers, per resource.
        self.supply: dict[str, Resources] = {}
        self._most: dict[str, int] | None = None
        # Devices allocated to each claim, the claim holding each, and the node of each
        # (driver, pool); the nodes whose free pairs need counting again.
        self._allocated: dict[ClaimRef, tuple[DeviceId, ...]] = {}
        self._holder: dict[DeviceId, ClaimRef] = {}
        self._pool_node: dict[tuple[str, str], str] = {}
        self.touched: set[str] = set()
        # The GPU models policy defines; the device attributes they are told apart by, and
        # each node's GPUs' values.
        self.gpu_models: tuple[GpuModel, ...] = ()
        self.wanted: frozenset[str] = frozenset()
        self.attributes: dict[str, DeviceAttributes] = {}

    # --- claims and templates -------------------------------------------------------
    # Each arrives parsed (`claim_entry`): a listing of 50,000 claims is not held as JSON.

    def put_claim(self, entry: ClaimEntry) -> set[PodKey]:
        """A claim or template seen; the pods to count again."""
        ref, asks, devices = entry
        self._allocate(ref, devices)
        if self._asks.get(ref) == asks:
            return set()
        self._asks[ref] = asks
        self._touch_allocated(ref)
        return set(self._users.get(ref, ()))

    def drop_claim(self, entry: ClaimEntry) -> set[PodKey]:
        ref = entry[0]
        self._allocate(ref, ())
        return set(self._users.get(ref, ())) if self._asks.pop(ref, None) is not None \
            else set()

    def list_claims(self, kind: ClaimKind, entries: Iterable[ClaimEntry]) -> set[PodKey]:
        """Every claim (or template) there is; the pods to count again."""
        entries = list(entries)
        before = {ref: asks for ref, asks in self._asks.items() if ref[1] == kind}
        for ref in before:
            del self._asks[ref]
        self._asks.update((ref, asks) for ref, asks, _ in entries)
        listed = {ref: devices for ref, _, devices in entries}
        for ref in [r for r in self._allocated if r[1] == kind and r not in listed]:
            self._allocate(ref, ())
        for ref, devices in listed.items():
            self._allocate(ref, devices)
        changed = {ref for ref in before.keys() | {r for r in self._asks if r[1] == kind}
                   if before.get(ref) != self._asks.get(ref)}
        for ref in changed:
            self._touch_allocated(ref)
        return {pod for ref in changed for pod in self._users.get(ref, ())}

    # --- allocations: what pairs are free (`webhook.devices.alignment`) -------------------

    def _allocate(self, ref: ClaimRef, devices: tuple[DeviceId, ...]) -> None:
        """Record the devices allocated to a claim; the nodes they are on are counted
        again (`touched`) where pairs are counted at all."""
        old = self._allocated.get(ref, ())
        if old == devices:
            return
        for device in old:
            self._holder.pop(device, None)
        for device in devices:
            self._holder[device] = ref
        if devices:
            self._allocated[ref] = devices
        else:
            self._allocated.pop(ref, None)
        self._touch(old + devices)

    def _touch_allocated(self, ref: ClaimRef) -> None:
        """A claim's asks changed: whether it keeps pairs may have too."""
        self._touch(self._allocated.get(ref, ()))

    def _touch(self, devices: Iterable[DeviceId]) -> None:
        if pair_kinds(self.kinds.values()):
            self.touched |= {n for d in devices if (n := self._pool_node.get(d[:2]))}

    def take_touched(self) -> set[str]:
        """The nodes whose free pairs an allocation may have changed, counted again."""
        nodes, self.touched = self.touched, set()
        return {n for n in nodes if self._recount(n) is not None}

    def _keeps_pairs(self, ref: ClaimRef) -> bool:
        return any(choice in self.kinds and self.kinds[choice].pairs is not None
                   for ask in self._asks.get(ref, ()) for choice, _ in ask.choices)

    def _pairs_on(self, slices: Iterable[_Slice]) -> Resources:
        """The node's free pairs, and those the claims that keep pairs hold (charged to
        their pods, as every claimed device is)."""
        devices = [d for s in slices for d in s.paired]
        if not devices:
            return {}
        taken = {d[0] for d in devices if (ref := self._holder.get(d[0])) is not None
                 and not self._keeps_pairs(ref)}
        return free_pairs(devices, taken, self.kinds.values())

    # --- pods -----------------------------------------------------------------------------

    def pod_put(self, key: PodKey, raw_pod: Mapping[str, Any]) -> set[PodKey]:
        """A pod seen (its claims never change); the other pods to count again: those
        that share a claim with it, whose first by name it may now be."""
        refs = refs_of(key.namespace, raw_pod)
        if not refs or self._refs.get(key) == refs:
            return set()
        self._refs[key] = refs
        for ref in refs:
            self._users.setdefault(ref, set()).add(key)
        return self._sharers(key, refs)

    def pod_dropped(self, key: PodKey) -> set[PodKey]:
        refs = self._refs.pop(key, ())
        for ref in refs:
            users = self._users.get(ref)
            if users is not None:
                users.discard(key)
                if not users:
                    del self._users[ref]
        return self._sharers(key, refs)

    def _sharers(self, key: PodKey, refs: tuple[ClaimRef, ...]) -> set[PodKey]:
        return {p for ref in refs if ref[1] == "ResourceClaim"
                for p in self._users.get(ref, ()) if p != key}

    def claimed(self, key: PodKey) -> Resources:
        """What the pod's claims ask for, by resource."""
        asks: list[Ask] = []
        for ref in self._refs.get(key, ()):
            if ref[1] == "ResourceClaim" and min(self._users[ref]) != key:
                continue  # a shared claim counts once, on the first of its pods
            asks.extend(self._asks.get(ref, ()))
        return demand(tuple(asks), self.kinds, self._most_of) if asks else {}

    def models(self, key: PodKey) -> tuple[str, ...] | None:
        """The GPU models the pod's claims select (`webhook.devices.selectors`); None:
        any. A shared claim binds every pod that shares it."""
        if not self.gpu_models:
            return None
        asks = tuple(a for ref in self._refs.get(key, ()) for a in self._asks.get(ref, ()))
        return claimed_models(self.gpu_models, asks, self.kinds)

    def asks(self, ref: ClaimRef) -> tuple[Ask, ...] | None:
        return self._asks.get(ref)

    def claiming(self) -> set[PodKey]:
        """Every pod that names a claim."""
        return set(self._refs)

    # --- slices -----------------------------------------------------------------------
    # Each arrives parsed (`slice_entry`), its devices counted by the kinds of the time.

    def slice_entry(self, obj: Mapping[str, Any]) -> SliceEntry:
        """A slice as this index keeps it: its name, and its node, pool and what it offers
        (None for a slice bound to no one node)."""
        _, name = _name(obj)
        node = node_of(obj)
        if node is None:
            return name, None
        driver, pool, generation = pool_of(obj)
        kinds = self.kinds.values()
        return name, _Slice(node, (driver, pool), generation, counts(obj, kinds),
                            paired_devices(obj, kinds),
                            gpu_attributes(obj, kinds, self.wanted))

    def put_slice(self, entry: SliceEntry) -> str | None:
        """A slice seen; the node whose offer changed, if one did."""
        name, new = entry
        old = self._slices.pop(name, None)
        if new is not None:
            self._slices[name] = new
            self._on_node.setdefault(new.node, set()).add(name)
            self._pool_node[new.pool] = new.node
        if old is not None and (new is None or old.node != new.node):
            self._on_node[old.node].discard(name)
            self._recount(old.node)
        if new is not None:
            return self._recount(new.node)
        return old.node if old is not None else None

    def drop_slice(self, entry: SliceEntry) -> str | None:
        old = self._slices.pop(entry[0], None)
        if old is None:
            return None
        self._on_node[old.node].discard(entry[0])
        return self._recount(old.node)

    def list_slices(self, entries: Iterable[SliceEntry]) -> set[str]:
        """Every slice there is; the nodes whose offer changed."""
        before, attributes = dict(self.supply), dict(self.attributes)
        self._slices.clear()
        self._on_node.clear()
        self.supply.clear()
        self.attributes.clear()
        for entry in entries:
            self.put_slice(entry)
        return {n for n in before.keys() | self.supply.keys() | attributes.keys()
                | self.attributes.keys() if before.get(n) != self.supply.get(n)
                or attributes.get(n) != self.attributes.get(n)}

    def _recount(self, node: str) -> str | None:
        slices = [self._slices[n] for n in self._on_node.get(node, ())]
        newest: dict[tuple[str, str], int] = {}
        for s in slices:
            newest[s.pool] = max(s.generation, newest.get(s.pool, s.generation))
        slices = [s for s in slices if s.generation == newest[s.pool]]
        offers: Resources = self._pairs_on(slices)
        for s in slices:
            for resource, count in s.offers.items():
                offers[resource] = offers.get(resource, 0) + count
        attributes = merged(s.gpu_attributes for s in slices)
        if attributes != self.attributes.get(node, {}):
            if attributes:
                self.attributes[node] = attributes
            else:
                self.attributes.pop(node, None)
        elif offers == self.supply.get(node, {}):
            return None
        if offers:
            self.supply[node] = offers
        else:
            self.supply.pop(node, None)
        self._most = None
        return node

    def _most_of(self, device_class: str) -> int:
        if self._most is None:
            most: dict[str, int] = {}
            for offers in self.supply.values():
                for resource, count in offers.items():
                    most[resource] = max(count, most.get(resource, 0))
            self._most = most
        kind = self.kinds.get(device_class)
        return self._most.get(kind.resource, 0) if kind is not None else 0
