"""Memoizing what recurs on every review (a gang's label, a label key escaped for a JSON
Pointer) without keeping what a hostile review brings: a mutating webhook sees a pod
before the apiserver validates it, so a key or a name may be megabytes long, and a cache
of a thousand of those is gigabytes that outlive the review. Only short texts are kept;
a long one is computed each time, as it is rare and costs as much to hash as to make.

A shared leaf: both halves write JSON Patches."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")
# Longer than any label key (a 253-character prefix, `/` and a 63-character name) or gang
# name an operator composes from two names.
LONGEST = 320


class ShortMemo(Generic[T]):
    """`make(text)`, remembered for at most `size` texts of at most `longest` characters."""

    def __init__(self, make: Callable[[str], T], size: int, longest: int = LONGEST) -> None:
        self.make = make
        self.longest = longest
        self.cached = functools.lru_cache(maxsize=size)(make)

    def __call__(self, text: str) -> T:
        return self.cached(text) if len(text) <= self.longest else self.make(text)
