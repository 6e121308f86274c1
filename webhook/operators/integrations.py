"""What an integration is: one operator, whole, as the `integration` module of its folder
builds it from the folder's two halves and the registry lists it."""

from __future__ import annotations

from dataclasses import dataclass, field

from webhook.conventions.base import Convention
from webhook.workloads.expansions import Expansions


@dataclass(frozen=True, slots=True)
class Integration:
    """One operator: how its pods are read and, for explain, what pods its objects make.

    `conventions` (`webhook.conventions.base.Convention`, each in its folder's `reading`
    module) say which of its pods belong together and, with the optional `OwnerSized`,
    `Indexed` and `SamePriority`, how big the gang is, how its pods are numbered, and
    what its owner asks of them. Most operators have one; Kubernetes has two (indexed
    Jobs, PodGroups). `expansions` (its `making` module's) are the kinds explain expands,
    by (API group, kind): none for an operator whose pods people write themselves, or
    whose objects make no pods."""

    conventions: tuple[Convention, ...]
    expansions: Expansions = field(default_factory=dict)
