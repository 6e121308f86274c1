"""`airlock controller`'s command line: what it accepts, and a clear refusal of what it
cannot use."""

from __future__ import annotations

import pytest

from webhook.cli import build_parser


def test_the_forecast_resolution_defaults_to_15_seconds_and_takes_0() -> None:
    parser = build_parser()
    assert parser.parse_args(["controller"]).forecast_resolution == 15.0
    assert parser.parse_args(["controller", "--forecast-resolution", "0"]
                             ).forecast_resolution == 0.0


@pytest.mark.parametrize(("value", "said"), [
    ("-1", "seconds must be 0 or more"), ("nan", "seconds must be 0 or more"),
    ("inf", "and finite"), ("soon", "is not a number of seconds")])
def test_a_forecast_resolution_it_cannot_use_is_refused(
        value: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["controller", "--forecast-resolution", value])
    assert exited.value.code == 2
    assert said in capsys.readouterr().err
