"""What every part of the policy model shares: the strict base (a misspelt key is an
error) and the Kubernetes toleration, which classes and GPU slices both add to pods."""

from __future__ import annotations

import functools
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

# A DNS-label-like name: PriorityClasses, rules, topology levels.
NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
# A Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a name.
_LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*"
                        r"[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def is_label_key(text: str) -> bool:
    prefix, _, name = text.rpartition("/")
    return bool(_LABEL_KEY.match(text)) and len(name) <= 63 and len(prefix) <= 253


def is_label_value(text: str) -> bool:
    return len(text) <= 63 and bool(_LABEL_VALUE.match(text))


class Strict(BaseModel):
    # A misspelt key is an error a person must see, not a silently ignored setting.
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class Toleration(Strict):
    """A Kubernetes toleration, added to pods that lack it."""

    key: str | None = Field(None, description="Taint key; empty with `Exists` tolerates "
                            "every taint.")
    operator: Literal["Exists", "Equal"] = Field("Equal", description="`Exists` matches "
                                                 "any value of the key.")
    value: str | None = Field(None, description="Taint value, for `Equal`.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        None, description="Taint effect; empty matches every effect.")
    toleration_seconds: int | None = Field(
        None, alias="tolerationSeconds",
        description="How long a `NoExecute` taint is tolerated before eviction.")

    @model_validator(mode="after")
    def _consistent(self) -> Toleration:
        if self.operator == "Exists" and self.value:
            raise ValueError("a toleration with operator Exists may not set a value")
        if self.key is None and self.operator != "Exists":
            raise ValueError("a toleration without a key must use operator Exists")
        # The apiserver rejects the pod otherwise, after Airlock has patched it.
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError("tolerationSeconds needs effect NoExecute")
        return self

    @functools.cached_property
    def k8s(self) -> dict[str, object]:
        """As a pod spec writes it; made once per toleration, as it is added to pods on
        every admission (a frozen model never changes)."""
        return self.model_dump(by_alias=True, exclude_none=True)

    @functools.cached_property
    def identity(self) -> tuple[object, object, object, object]:
        """What makes two tolerations the same: key, operator (Equal by default), value,
        effect."""
        return self.key, self.operator, self.value, self.effect
