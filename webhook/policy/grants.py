"""Grants in policy: `spec.grants` lets the pods of some namespaces ask for a class that
`requiresGrant`, or keep a PriorityClass that ranks above their class's."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

from pydantic import Field, field_validator, model_validator

from webhook.keys import ClassName
from webhook.policy.classes import ClassSpec
from webhook.policy.fields import NAME
from webhook.policy.fields import Strict as _Strict
from webhook.policy.sources import Loc


class Grant(_Strict):
    """What the pods of some namespaces may ask for themselves: a class, or PriorityClasses
    above their class's priority. Each entry names one of the two."""

    class_: ClassName | None = Field(
        None, alias="class", description="A class that `requiresGrant`: pods of the "
        "namespaces may ask for it (its label, or its PriorityClass by name).")
    priority_classes: tuple[str, ...] = Field(
        (), alias="priorityClasses", description="PriorityClasses that are no class's (a "
        "team's own, `system-cluster-critical`, ...) which pods of the namespaces may keep "
        "though they rank above their class's. Elsewhere such a pod is given its class's "
        "PriorityClass; one ranking no higher is kept with a warning.")
    namespaces: tuple[str, ...] = Field(description="Shell-style globs: namespaces whose pods "
                                        "may ask for it themselves.")

    @field_validator("priority_classes")
    @classmethod
    def _priority_class_names(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        for name in names:
            if not NAME.match(name) or len(name) > 253:
                raise ValueError(f"{name!r} is not a valid PriorityClass name (DNS subdomain)")
        return names

    @model_validator(mode="after")
    def _one_of_the_two(self) -> Grant:
        if (self.class_ is None) == (not self.priority_classes):
            raise ValueError("a grant names a `class` or `priorityClasses`, one of the two")
        return self


def grant_problems(classes: Mapping[ClassName, ClassSpec], grants: Sequence[Grant]
                   ) -> Iterator[tuple[int, Loc, str]]:
    """Each PriorityClass a grant names that is a class's own: the grant's index, the path
    inside it, and the message. A class's PriorityClass goes with the class: granting it
    alone would let a pod keep it where the class itself is not granted."""
    owners = {spec.priority_class.name: name for name, spec in classes.items()}
    for i, grant in enumerate(grants):
        for j, name in enumerate(grant.priority_classes):
            if name in owners:
                yield i, ("priorityClasses", j), (
                    f"grant: priorityClasses names {name}, class {owners[name]}'s own "
                    f"PriorityClass; grant the class instead (class: {owners[name]})")
