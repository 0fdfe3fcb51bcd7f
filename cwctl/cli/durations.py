"""The one duration grammar of every flag that takes a time.

``--duration 5s``, ``--interval 500ms``, ``--heatmap-max 100us``, ``--duration 2`` (a
bare number is seconds): every such flag parses with ``cwctl.units.parse_ns``, checks its
own range, and says what went wrong in the same words. The value reaches the command in
seconds (a float), whatever unit was typed; ``--help`` shows its default in the same
grammar (``[default: 30s]``, not ``[default: 30.0]``), and a default given as words
without click's parentheses (``[default: 1us]``, not ``[default: (1us)]``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import typer
import typer.core

from cwctl.units import fmt_duration, parse_seconds

METAVAR = "DURATION"


@dataclass(frozen=True)
class Duration:
    """A duration flag's parser (typer's ``parser=``), in seconds; ``low``/``high`` bound
    it, inclusive."""

    low: float | None = None
    high: float | None = None

    def __call__(self, value: Any) -> float:
        if isinstance(value, int | float):  # a default, already in seconds
            return float(value)
        try:
            seconds = parse_seconds(str(value))
        except ValueError as exc:
            raise typer.BadParameter(str(exc)) from None
        too_low = self.low is not None and seconds < self.low
        too_high = self.high is not None and seconds > self.high
        if too_low or too_high:
            raise typer.BadParameter(f"{value!r} is out of range: give {self.range_text()}")
        return seconds

    def range_text(self) -> str:
        if self.low is not None and self.high is not None:
            return f"{fmt_duration(self.low)} to {fmt_duration(self.high)}"
        if self.low is not None:
            return f"at least {fmt_duration(self.low)}"
        if self.high is not None:
            return f"at most {fmt_duration(self.high)}"
        return "any duration"


_typer_default_string = typer.core._get_default_string


def _default_string(obj: Any, *, ctx: Any, show_default_is_str: bool, default_value: Any) -> str:
    """typer's default text, with durations in their grammar and words unbracketed."""
    if show_default_is_str:
        return str(obj.show_default)
    info = getattr(getattr(obj, "type_descriptor", None), "parameter_info", None)
    parser = getattr(info, "parser", None) or getattr(getattr(obj, "type", None), "func", None)
    number = isinstance(default_value, int | float) and not isinstance(default_value, bool)
    if isinstance(parser, Duration) and number:
        return fmt_duration(float(default_value))
    return str(
        _typer_default_string(
            obj, ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
        )
    )


typer.core._get_default_string = _default_string  # every --help, one way to say a default
