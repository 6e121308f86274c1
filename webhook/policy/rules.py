"""Classification rules (`spec.rules`): what a pod must show to get a class."""

from __future__ import annotations

from pydantic import Field, field_validator

from webhook.keys import ClassName
from webhook.policy.fields import NAME, Strict


class Match(Strict):
    """All given conditions must hold; a list condition holds when any item matches."""

    labels: dict[str, str] = Field(default_factory=dict, description="Labels with these values.")
    has_any_label: tuple[str, ...] = Field(
        (), alias="hasAnyLabel", description="Label keys; at least one present.")
    lacks_labels: tuple[str, ...] = Field(
        (), alias="lacksLabels", description="Label keys; none present.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations with these values.")
    has_any_annotation: tuple[str, ...] = Field(
        (), alias="hasAnyAnnotation", description="Annotation keys; at least one present.")
    owner_kinds: tuple[str, ...] = Field(
        (), alias="ownerKinds", description="Kind of the pod's controlling owner."
    )
    images: tuple[str, ...] = Field(
        (), description="Shell-style globs; any container image matching any glob."
    )
    namespaces: tuple[str, ...] = Field((), description="Shell-style globs on the namespace.")
    requests: tuple[str, ...] = Field(
        (), description="Resource names; the pod requests at least one of them."
    )
    in_gang: bool | None = Field(
        None, alias="inGang", description="Whether a gang convention recognised the pod."
    )


class Rule(Strict):
    name: str = Field(description="Unique across all files; recorded on the pod it decides.")
    class_: ClassName = Field(alias="class", description="The class the rule gives.")
    match: Match = Field(default_factory=Match,
                         description="Conditions; an empty match matches every GPU pod.")

    @field_validator("name")
    @classmethod
    def _rule_name(cls, v: str) -> str:
        if not NAME.match(v) or len(v) > 63:
            raise ValueError(f"{v!r}: rule names are lowercase letters, digits, '-' and '.'")
        return v
