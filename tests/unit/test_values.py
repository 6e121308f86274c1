"""Every value a pod carries, read within bounds (`webhook.values`): what each reader takes,
what it refuses and how the refusal reads. Hostile values are refused as cheaply as the
honest ones are read; the benches measure that (`python -m bench.fuzz`)."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest

from webhook.values import (
    MAX_DEVICES,
    MAX_PODS,
    MAX_SECONDS,
    MAX_UNITS,
    Refused,
    amount,
    count,
    described,
    devices,
    duration,
    instant,
    share,
    shown,
    units,
)

HUGE = "9" * 5000  # past Python's 4,300 digits for int(), which then raises


@pytest.mark.parametrize(("text", "expected"), [
    ("1", 1), ("64", 64), (" 8 ", 8), (str(MAX_PODS), MAX_PODS),
    ("0", None), ("-1", None), ("1.0", None), ("1e3", None), ("", None), ("eight", None),
    ("\u0661\u0662", None), ("²", None), (str(MAX_PODS + 1), None), ("9" * 400, None),
    (HUGE, None),
])
def test_counts_are_plain_digits_in_range(text: str, expected: int | None) -> None:
    found = count("k", text)
    assert (found if isinstance(found, int) else None) == expected


@pytest.mark.parametrize(("text", "whole_seconds"), [
    ("3600", 3600), ("45s", 45), ("90m", 5400), ("2h", 7200), ("1h30m", 5400),
    ("1.5h", 5400), (" 10m ", 600), (str(MAX_SECONDS), MAX_SECONDS),
    # Rounded up: the controller counts whole seconds, and never less than was asked.
    ("500ms", 1), ("1m0.5s", 61),
    ("0", None), ("soon", None), ("", None), ("-5m", None), ("1e3", None), ("5 m", None),
    ("1d", None), ("\u0661\u0662s", None), (str(MAX_SECONDS + 1), None),
    ("9" * 400, None), ("9" * 39 + "h", None), (HUGE + "s", None),
])
def test_run_times_are_seconds_or_go_durations_of_at_most_a_year(
        text: str, whole_seconds: int | None) -> None:
    found = duration("k", text)
    assert (found if isinstance(found, int) else None) == whole_seconds


@pytest.mark.parametrize(("text", "expected"), [
    ("0.25", Fraction(1, 4)), ("1/4", Fraction(1, 4)), ("1", Fraction(1)), (".5", Fraction(1, 2)),
    ("0", None), ("1.5", None), ("1/0", None), ("-0.5", None), ("half", None),
    ("1e-200000000", None), ("1e-2", None), ("nan", None), ("inf", None), (HUGE, None),
])
def test_shares_are_decimals_or_ratios_in_zero_to_one(text: str,
                                                      expected: Fraction | None) -> None:
    found = share("k", text)
    assert (found if isinstance(found, Fraction) else None) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("10Gi", Decimal(10 * 2**30)), ("80G", Decimal(80 * 10**9)), ("1", Decimal(1)),
    ("0", None), ("-1Gi", None), ("1e-200000000", None), ("1e200000000", None),
    ("1e9999999Ki", None), ("2Pi", None), ("lots", None), (HUGE, None),
])
def test_amounts_are_quantities_from_one_to_a_bound(text: str,
                                                    expected: Decimal | None) -> None:
    found = amount("k", text)
    assert (found if isinstance(found, Decimal) else None) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("2026-11-28T08:00:00Z", 1795852800.0), ("2026-11-28T09:00:00+01:00", 1795852800.0),
    ("yesterday", None), ("9" * 400, None), ("", None),
])
def test_instants_are_rfc3339(text: str, expected: float | None) -> None:
    found = instant("k", text)
    assert (found if isinstance(found, float) else None) == expected


@pytest.mark.parametrize(("quantity", "scale", "expected"), [
    ("8", 1, 8), ("500m", 1000, 500), ("1500m", 1, 2), ("64Gi", 1, 64 * 2**30), (3, 1, 3),
    ("1e200000000", 1, MAX_UNITS), ("1e9999999", 1, MAX_UNITS), ("-1e200000000", 1, -MAX_UNITS),
    ("1e-200000000", 1, 1), ("nonsense", 1, 0), (HUGE, 1, 0),
])
def test_resource_units_are_held_to_a_bound(quantity: str | int, scale: int,
                                            expected: int) -> None:
    assert units(quantity, scale) == expected


@pytest.mark.parametrize(("quantity", "expected"), [
    ("8", 8), (8, 8), ("0", 0), ("1k", 1000), ("8.0", 8), (" 2 ", 2),
    (str(MAX_DEVICES), MAX_DEVICES),
    ("500m", None), ("0.5", None), ("-1", None), (str(MAX_DEVICES + 1), None), ("1e5", None),
    ("1e-200000000", None), ("1e200000000", None), ("1E+999999999", None), ("\uff18", None),
    ("", None), (True, None), (HUGE, None),
])
def test_devices_are_whole_numbers_up_to_a_bound(quantity: str | int,
                                                 expected: int | None) -> None:
    found = devices("k", quantity)
    assert (found if isinstance(found, int) else None) == expected


@pytest.mark.parametrize(("value", "expected"), [
    ("v1", "'v1'"), (HUGE, "'999999999999999999999999'... (5000 characters)"), (3, "a int"),
    ([[[]]], "a list"), ({"a": 1}, "a dict"), (None, "a NoneType"),
])
def test_any_json_value_is_described_briefly(value: object, expected: str) -> None:
    assert described(value) == expected


def test_a_refusal_names_the_key_shows_the_start_of_the_value_and_what_is_accepted() -> None:
    found = count("gpu-airlock.io/gang-size", HUGE)
    assert isinstance(found, Refused)
    assert found.message == (
        "gpu-airlock.io/gang-size='999999999999999999999999'... (5000 characters) is not "
        f"a whole number from 1 to {MAX_PODS}")


def test_a_short_value_is_shown_whole() -> None:
    assert shown("half") == "'half'"
