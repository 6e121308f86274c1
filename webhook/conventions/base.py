"""What a gang convention is: one small module that recognises its operator's pods."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Protocol

from webhook.pods import PodView


@dataclass(frozen=True, slots=True)
class Membership:
    """A pod's membership in a gang: the gang's name (unique per namespace), its size
    when the pod says it (None when only the owner object knows), and the convention
    that found it."""

    name: str
    size: int | None
    source: str
    # Set when the pod names a size that is not a positive integer: validation denies.
    size_error: str | None = None


class Convention(Protocol):
    """One operator's way of saying which pods belong together."""

    name: str

    def detect(self, pod: PodView) -> Membership | None:
        """The pod's gang under this convention, or None when it does not apply."""
        ...


def parse_size(raw: str | None, key: str) -> tuple[int | None, str | None]:
    """A gang size annotation as (size, error)."""
    if raw is None:
        return None, f"annotation {key} is missing"
    try:
        size = int(raw.strip())
    except ValueError:
        return None, f"annotation {key}={raw!r} is not a whole number"
    if size < 1:
        return None, f"annotation {key}={raw!r} must be at least 1"
    return size, None


def sized(name: str, source: str, pod: PodView, key: str) -> Membership:
    size, error = parse_size(pod.annotations.get(key), key)
    return Membership(name=name, size=size, source=source, size_error=error)


_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def label_value(name: str) -> str:
    """The gang's name as a label value: itself when it is one, else a readable prefix
    and a hash, so long compound names (jobset + replicated job) still select cleanly."""
    if len(name) <= 63 and _LABEL_VALUE.match(name):
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()[:10]
    prefix = re.sub(r"[^-A-Za-z0-9_.]", "-", name)[:52].strip("-_.")
    return f"{prefix}-{digest}" if prefix else digest
