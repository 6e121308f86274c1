"""The marks the webhook left on a pod for the controller (`webhook.keys`): the gang it
is in, its sizes, topology, slice and expected run time, or that it queued it alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.accelerators import recorded
from webhook.controller.core.resources import Resources, requested
from webhook.keys import (
    ACCELERATORS_ANNOTATION,
    GANG_EXPECTED_MIN_ANNOTATION,
    GANG_EXPECTED_SIZE_ANNOTATION,
    GANG_LABEL,
    GANG_SOURCE_ANNOTATION,
    LEGACY_GANG_LABEL,
    QUEUED_ANNOTATION,
    RUNTIME_SECONDS_ANNOTATION,
    SLICE_EXPECTED_SIZE_ANNOTATION,
    SLICE_INDEX_ANNOTATION,
    SLICE_KEY_ANNOTATION,
    TOPOLOGY_KEY_ANNOTATION,
    TOPOLOGY_MODE_ANNOTATION,
)
from webhook.values import MAX_PODS, MAX_SECONDS, Refused, count

_NO_NAMES: frozenset[str] = frozenset()
_TOPOLOGY = frozenset({GANG_SOURCE_ANNOTATION, TOPOLOGY_KEY_ANNOTATION,
                       TOPOLOGY_MODE_ANNOTATION})


@dataclass(frozen=True, slots=True)
class Marks:
    gang: str | None = None
    # The convention that found the gang.
    source: str | None = None
    expected_size: int | None = None
    # An elastic gang's minimum.
    min_size: int | None = None
    topology_key: str | None = None
    topology_mode: str | None = None
    # The slice level's node label, the slice's size, and which slice the pod is in when
    # its operator gives an index.
    slice_key: str | None = None
    slice_size: int | None = None
    slice_index: int | None = None
    # The expected run time in seconds.
    runtime: float | None = None
    # A pod Airlock queued alone (in no gang): admitted as a gang of one.
    single: bool = False
    # Accelerators the webhook recorded as requested: counted even when the current
    # policy no longer names them.
    accelerators: frozenset[str] = _NO_NAMES
    # The first mark out of bounds: one the webhook never writes (a pod it never saw, or
    # one forged while it was down). The pod is set aside for it, never acted on.
    refused: str | None = None

    @property
    def in_gang(self) -> bool:
        return self.gang is not None

    def decided(self, node_name: str | None) -> bool:
        """Whether Airlock decides the pod: a gang's, or a single it queued until bound
        (from then on it only counts for capacity)."""
        return self.in_gang or (self.single and node_name is None)

    @classmethod
    def read(cls, labels: Mapping[str, str], annotations: Mapping[str, str],
             requests: Resources, node_name: str | None) -> Marks:
        """The marks on a pod that asks for `requests` and is bound to `node_name`: all of
        them on a gang's pod, a queued single's own, and on any other pod only what it
        says of a gang and topology."""
        gang = labels.get(GANG_LABEL) or labels.get(LEGACY_GANG_LABEL)
        queued = gang is None and annotations.get(QUEUED_ANNOTATION) == "true"
        if gang is None and not queued and _TOPOLOGY.isdisjoint(annotations):
            return UNMARKED  # most of a cluster's pods: read them at the least cost
        topology = cls(source=annotations.get(GANG_SOURCE_ANNOTATION),
                       topology_key=annotations.get(TOPOLOGY_KEY_ANNOTATION),
                       topology_mode=annotations.get(TOPOLOGY_MODE_ANNOTATION))
        if gang is not None:
            return topology._of_gang(gang, annotations, requests)
        return topology._of_single(annotations, requests, node_name) if queued else topology

    def _of_gang(self, gang: str, annotations: Mapping[str, str], requests: Resources
                 ) -> Marks:
        counts = _Counts(annotations)
        return Marks(
            gang=gang, source=self.source, topology_key=self.topology_key,
            topology_mode=self.topology_mode,
            expected_size=counts.get(GANG_EXPECTED_SIZE_ANNOTATION),
            min_size=counts.get(GANG_EXPECTED_MIN_ANNOTATION),
            runtime=counts.get(RUNTIME_SECONDS_ANNOTATION, most=MAX_SECONDS),
            slice_key=annotations.get(SLICE_KEY_ANNOTATION),
            slice_size=counts.get(SLICE_EXPECTED_SIZE_ANNOTATION),
            slice_index=counts.get(SLICE_INDEX_ANNOTATION, least=0, most=MAX_PODS - 1),
            accelerators=_accelerators(annotations, requests), refused=counts.refused)

    def _of_single(self, annotations: Mapping[str, str], requests: Resources,
                   node_name: str | None) -> Marks:
        counts = _Counts(annotations)
        # The run time is read while bound too: a pod's expected end is what backfill
        # plans the head's start with, and a queued single pod is bound most of its life.
        # Its accelerators count only while Airlock decides it, as for a gang's.
        return Marks(
            source=self.source, topology_key=self.topology_key,
            topology_mode=self.topology_mode, single=True,
            runtime=counts.get(RUNTIME_SECONDS_ANNOTATION, most=MAX_SECONDS),
            accelerators=_accelerators(annotations, requests) if node_name is None
            else _NO_NAMES, refused=counts.refused)


# A pod in no gang and not queued, with no topology: most of a cluster's pods, one value.
UNMARKED = Marks()


def _accelerators(annotations: Mapping[str, str], requests: Resources) -> frozenset[str]:
    # Only what the pod itself requests, all the webhook ever records: a mark on a pod the
    # webhook never saw must not make another team's device count.
    return recorded(annotations.get(ACCELERATORS_ANNOTATION, "")).intersection(
        requested(requests))


class _Counts:
    """The counts the webhook recorded on a pod, read within bounds; `refused`, why the
    first out of them is no mark of the webhook's."""

    __slots__ = ("annotations", "refused")

    def __init__(self, annotations: Mapping[str, str]) -> None:
        self.annotations = annotations
        self.refused: str | None = None

    def get(self, key: str, least: int = 1, most: int = MAX_PODS) -> int | None:
        text = self.annotations.get(key)
        if text is None:
            return None
        found = count(key, text, least, most) if isinstance(text, str) else \
            Refused(key, repr(text), "text")
        if isinstance(found, Refused):
            self.refused = self.refused or f"annotation {found.message}"
            return None
        return found
