"""What the cluster's PriorityClasses give a pod, as the apiserver's `Priority` admission
plugin resolves them: the value and the preemption policy, by class name.

Mutation writes these beside a `priorityClassName` it sets, so that the plugin, run again
after the webhook, finds them already right and changes nothing; the apiserver then has no
reason to call the webhook a second time (`reinvocationPolicy: IfNeeded`). A value that
is not the PriorityClass object's would have the plugin refuse the pod, so only what a
watch read off the objects counts, never the policy's idea of them: a name not there is
left to the plugin, as before (docs/admission.md, "One call per pod").

Pure: objects in, a table out."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

# The preemption policies a pod may carry (core/v1 PreemptionPolicy).
POLICIES: Final = frozenset({"PreemptLowerPriority", "Never"})
# The range of a PriorityClass's value (int32); anything else is not one the plugin gave.
_LOWEST, _HIGHEST = -(2**31), 2**31 - 1


class Resolved(NamedTuple):
    value: int
    preemption: str


Priorities = Mapping[str, Resolved]
# Nothing known: every pod is left to the Priority plugin (no cluster read, or not listed).
UNKNOWN: Final[Priorities] = {}


def resolved(obj: Mapping[str, Any]) -> tuple[str, Resolved] | None:
    """A PriorityClass object's name and what it gives a pod; None for one that is not
    whole (no name, a value that is no int32, an unknown or missing preemption policy, which
    the apiserver defaults, so a missing one is an object this does not understand)."""
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    value = obj.get("value")
    preemption = obj.get("preemptionPolicy")
    if not isinstance(name, str) or not name or type(value) is not int \
            or not _LOWEST <= value <= _HIGHEST or preemption not in POLICIES:
        return None
    return name, Resolved(value, preemption)
