"""Colour for numbers: utilization, memory and temperature levels in the current theme's words.

Cells are Rich text, so they cannot use CSS variables; this turns the theme's semantic colours
(success / warning / error / secondary) into Rich styles once per theme change. Under NO_COLOR
Textual drops the colours and the words and gauges still carry the meaning.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.style import Style
from textual.color import Color
from textual.theme import Theme

# Like nvitop's --gpu-util-thresh / --mem-util-thresh: below LOW is light, above HIGH is heavy.
UTIL_THRESHOLDS = (10.0, 75.0)
MEMORY_THRESHOLDS = (10.0, 80.0)
TEMPERATURE_THRESHOLDS = (70.0, 84.0)


def _style(value: str | None, fallback: str, *, bold: bool = False) -> Style:
    try:
        return Style(color=Color.parse(value or fallback).rich_color, bold=bold)
    except Exception:  # noqa: BLE001 - an odd theme value must not break rendering
        return Style(bold=bold)


@dataclass(frozen=True)
class Palette:
    ok: Style
    warn: Style
    bad: Style
    dim: Style
    accent: Style
    strong: Style

    @classmethod
    def from_theme(cls, theme: Theme) -> Palette:
        return cls(
            ok=_style(theme.success, "green"),
            warn=_style(theme.warning, "yellow"),
            bad=_style(theme.error, "red", bold=True),
            dim=Style(dim=True),
            accent=_style(theme.accent, "cyan"),
            strong=Style(bold=True),
        )

    def level(self, value: float | None, thresholds: tuple[float, float]) -> Style:
        """Light / moderate / heavy, as nvitop colours load; ``None`` (N/A) is dim."""
        if value is None:
            return self.dim
        low, high = thresholds
        if value >= high:
            return self.bad
        return self.warn if value >= low else self.ok
