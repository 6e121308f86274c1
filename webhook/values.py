"""Every value a pod carries, read within bounds: counts, run times, shares of a GPU,
amounts of memory and instants. Whatever is on a pod is its author's word, and an author
may write a number of 5,000 digits or an exponent of 200 million, which Python's `int`,
`Fraction` and `Decimal` would happily spend minutes and gigabytes on. Here the text is
bounded in length before anything looks at it, its value in range before anything
computes with it, and what is out of either is refused with the key, the first
characters of what was written and what is accepted.

The webhook denies what is refused (its author can fix it); the controller, which also
sees pods the webhook never saw, sets the pod aside as invalid. Neither raises. A shared
leaf: both halves import it, and it imports nothing of either."""

from __future__ import annotations

import datetime
import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Final

from webhook.quantities import WIDE, parse_quantity

# Longer than any honest value of these keys: a gang size, a duration such as
# "1h30m15s", "0.125", "1/8", "80Gi", an RFC 3339 time with nanoseconds and an offset.
MAX_TEXT: Final = 40
# How much of a refused value a message shows.
SHOWN: Final = 24
# The most pods a gang may have: an Indexed Job's completions are bounded alike.
MAX_PODS: Final = 100_000
# The longest run time anyone may state: a year. Longer is no plan a scheduler can use.
MAX_SECONDS: Final = 366 * 24 * 3600
# The most GPU memory a pod may ask for on one GPU (no GPU comes near it).
MAX_GPU_MEMORY: Final = Decimal(2**50)
# A share of a GPU written as a decimal needs no more places than this ("0.0625").
_SHARE = re.compile(r"^(?:[0-9]{1,6}(?:\.[0-9]{0,9})?|\.[0-9]{1,9}|[0-9]{1,6}/[0-9]{1,6})$")
# A Go duration (time.ParseDuration) without a sign: "90m", "1h30m", "1.5h", "45s".
_DURATION = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_UNIT_SECONDS: Final = {"ns": Fraction(1, 10**9), "us": Fraction(1, 10**6),
                        "µs": Fraction(1, 10**6), "μs": Fraction(1, 10**6),
                        "ms": Fraction(1, 1000), "s": Fraction(1), "m": Fraction(60),
                        "h": Fraction(3600)}


def shown(text: str) -> str:
    """A value as a message quotes it: its first characters, and how long it is when
    that is not all of it."""
    if len(text) <= SHOWN:
        return repr(text)
    return f"{text[:SHOWN]!r}... ({len(text)} characters)"


def described(value: object) -> str:
    """Any JSON value as a message names it: text by `shown`, anything else by its type
    alone (the repr of a list nested a thousand deep raises, and of a large one is large)."""
    return shown(value) if isinstance(value, str) else f"a {type(value).__name__}"


@dataclass(frozen=True, slots=True)
class Refused:
    """Why a value cannot be followed: the key it was under, what was written, and what
    the key accepts ("a whole number from 1 to 100000")."""

    key: str
    text: str
    accepted: str

    @property
    def message(self) -> str:
        return f"{self.key}={shown(self.text)} is not {self.accepted}"


def _bounded(text: str) -> str | None:
    stripped = text.strip()
    return stripped if len(stripped) <= MAX_TEXT and stripped.isascii() else None


def count(key: str, text: str, least: int = 1, most: int = MAX_PODS) -> int | Refused:
    """A whole number from `least` to `most`, in plain ASCII digits."""
    bounded = _bounded(text)
    if bounded is not None and bounded.isdigit() and least <= int(bounded) <= most:
        return int(bounded)
    return Refused(key, text, f"a whole number from {least} to {most}")


def duration(key: str, text: str, least: int = 1, most: int = MAX_SECONDS) -> int | Refused:
    """A run time in whole seconds, rounded up: plain seconds ("3600") or a Go duration
    ("90m", "1h30m"), from `least` to `most` seconds."""
    refused = Refused(key, text, f"a run time from {least}s to {most}s; write whole "
                                 f"seconds (3600) or a duration (45s, 90m, 2h, 1h30m)")
    bounded = _bounded(text)
    if bounded is None or not bounded:
        return refused
    if bounded.isdigit():
        seconds = int(bounded)
    elif _DURATION.sub("", bounded):
        return refused
    else:
        # Bounded text: at most 40 digits a term, so the sum is a small exact number.
        seconds = math.ceil(sum(Fraction(number.rstrip(".") or "0") * _UNIT_SECONDS[unit]
                                for number, unit in _DURATION.findall(bounded)))
    return seconds if least <= seconds <= most else refused


def share(key: str, text: str) -> Fraction | Refused:
    """A share of one GPU, in (0, 1]: a decimal ("0.25") or a ratio ("1/4")."""
    refused = Refused(key, text, "a number in (0, 1] (e.g. 0.25 or 1/4)")
    bounded = _bounded(text)
    if bounded is None or not _SHARE.match(bounded):
        return refused
    try:
        value = Fraction(bounded)
    except ZeroDivisionError:
        return refused
    return value if 0 < value <= 1 else refused


def amount(key: str, text: str, most: Decimal = MAX_GPU_MEMORY) -> Decimal | Refused:
    """A quantity ("10Gi", "80G") from 1 to `most`: below one unit (a byte) is nothing a
    GPU offers, and an exponent of -200000000 is a number only an attacker writes."""
    refused = Refused(key, text, f"a quantity from 1 to {_quantity(most)} (e.g. 10Gi)")
    bounded = _bounded(text)
    if bounded is None:
        return refused
    try:
        value = parse_quantity(bounded)
    except ValueError:
        return refused
    # Comparing a Decimal with a huge exponent is cheap; turning it into an int or a
    # Fraction is not.
    return value if 1 <= value <= most else refused


# The most devices of one accelerator a container may ask for, or a DRA claim request may
# count: far beyond any node (8 GPUs of 7 MIG slices each, 128 NeuronCores), so a pod
# asking more could never be placed, and small enough that any sum of them stays small.
MAX_DEVICES: Final = 10_000


def devices(key: str, quantity: str | int | float, most: int = MAX_DEVICES) -> int | Refused:
    """A number of devices a container requests or limits: a whole number from 0 to `most`,
    written as the apiserver writes quantities ("8", "1k")."""
    text = str(quantity)
    refused = Refused(key, text, f"a whole number from 0 to {most}")
    bounded = _bounded(text)
    if bounded is None or isinstance(quantity, bool):
        return refused
    try:
        value = parse_quantity(bounded)
    except ValueError:
        return refused
    # Compared before it is turned into an int: bounded text may still say 1e999999.
    if not 0 <= value <= most or value != value.to_integral_value():
        return refused
    return int(value)


def _quantity(value: Decimal) -> str:
    for suffix, scale in (("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30)):
        if value % scale == 0:
            return f"{value // scale}{suffix}"
    return str(value)


def instant(key: str, text: str) -> float | Refused:
    """An RFC 3339 time ("2026-11-28T08:00:00Z") as seconds since the epoch."""
    refused = Refused(key, text, "an RFC 3339 time (e.g. 2026-11-28T08:00:00Z)")
    bounded = _bounded(text)
    if bounded is None:
        return refused
    try:
        return datetime.datetime.fromisoformat(bounded.replace("Z", "+00:00")).timestamp()
    except (ValueError, OverflowError):
        return refused


# A resource a pod requests, in whole units, at most this: far beyond any node, and small
# enough that no sum over a cluster's pods grows into a number that costs to handle.
MAX_UNITS: Final = 2**62


def units(quantity: str | int | float, scale: int = 1) -> int:
    """A resource quantity the apiserver accepted, times `scale` (1000 for milli-CPU),
    rounded up to whole units and held to `MAX_UNITS`; 0 when it is not a quantity. The
    apiserver validates quantities, but stores numbers with exponents far beyond what
    any node offers, and turning those into integers takes as long as they are large."""
    if isinstance(quantity, str) and len(quantity) > MAX_TEXT:
        return 0
    try:
        value = parse_quantity(quantity)
    except ValueError:
        return 0
    # Bounded before anything computes with it: the default decimal context overflows
    # past an exponent of 999999, and an int of 1e200000000 takes a minute to make.
    if value > MAX_UNITS:
        return MAX_UNITS
    if value < -MAX_UNITS:
        return -MAX_UNITS
    return math.ceil(WIDE.multiply(value, scale))
