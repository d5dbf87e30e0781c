"""Check boxes and radio buttons whose mark is a glyph, not only a colour: ``▐X▌`` ticked,
``▐ ▌`` not, and ``●`` for the chosen radio button, so a terminal without colour (``NO_COLOR``,
a monochrome serial console) still tells them apart."""

from __future__ import annotations

from textual.widgets import Checkbox, RadioButton


class TickBox(Checkbox):
    """A check box that draws its mark only when ticked."""

    @property  # type: ignore[override]
    def BUTTON_INNER(self) -> str:  # noqa: N802 - Textual's name for the mark
        return "X" if self.value else " "


class Choice(RadioButton):
    """A radio button that draws its dot only when chosen."""

    @property  # type: ignore[override]
    def BUTTON_INNER(self) -> str:  # noqa: N802 - Textual's name for the mark
        return "●" if self.value else " "
