"""Kubernetes resource quantities ("500m", "8", "64Gi", "1e3") as exact Decimals."""

from __future__ import annotations

from decimal import MAX_EMAX, MIN_EMIN, Context, Decimal, DecimalException

_SUFFIXES: dict[str, Decimal] = {
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"),
    "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
    "P": Decimal("1e15"), "E": Decimal("1e18"),
    "Ki": Decimal(2**10), "Mi": Decimal(2**20), "Gi": Decimal(2**30), "Ti": Decimal(2**40),
    "Pi": Decimal(2**50), "Ei": Decimal(2**60),
}


# Exponents as far as Decimal goes: "1e9999999" is a number (far beyond any node), not an
# error, so whoever bounds it sees how large it is. Comparing such a number is cheap;
# only turning it into an int or a Fraction is not, and callers bound it first.
WIDE = Context(Emax=MAX_EMAX, Emin=MIN_EMIN)


def parse_quantity(q: str | int | float) -> Decimal:
    """The quantity's value; ValueError when it is not a Kubernetes quantity."""
    if isinstance(q, bool):
        raise ValueError(f"{q!r} is not a quantity")
    if isinstance(q, int | float):
        return Decimal(str(q))
    text = q.strip()
    for suffix in (text[-2:], text[-1:]):
        if suffix in _SUFFIXES and len(text) > len(suffix):
            number, scale = text[: -len(suffix)], _SUFFIXES[suffix]
            break
    else:
        number, scale = text, Decimal(1)
    try:
        value = WIDE.multiply(Decimal(number), scale)
    except DecimalException:
        raise ValueError(f"{q!r} is not a quantity") from None
    if not value.is_finite():
        raise ValueError(f"{q!r} is not a quantity")
    return value
