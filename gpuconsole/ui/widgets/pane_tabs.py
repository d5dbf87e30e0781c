"""The one-line strip of pane names: the active pane highlighted, a click switches.

Lighter than Textual's TabbedContent (a single widget, no per-tab widgets or underline
animation), which keeps the first frame quick; the number keys are the main way to switch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message

from gpuconsole.ui.widgets.text_view import TextView

if TYPE_CHECKING:
    from gpuconsole.ui.registry import PaneSpec


class PaneTabs(TextView):
    """``1 Overview  2 GPUs  3 Jobs  4 Instances  5 Budgets  6 Audit``."""

    class Clicked(Message):
        """The user clicked a pane's name."""

        def __init__(self, pane_id: str) -> None:
            super().__init__()
            self.pane_id = pane_id

    def __init__(self, panes: Sequence[PaneSpec], **kwargs: object) -> None:
        """``panes``: the panes in tab order (:data:`gpuconsole.ui.registry.PANES`); each
        one's short title is used when the full strip does not fit the width."""
        super().__init__(**kwargs)
        self.panes = {spec.id: spec for spec in panes}
        self._ranges: list[tuple[int, int, str]] = []
        self._last: tuple[str, Style, Style] | None = None

    def draw(self, active: str, active_style: Style, key_style: Style) -> None:
        """Draw the strip: spaced out when it fits, else packed with the short titles, so every
        pane's key stays in sight at 80 columns."""
        self._last = (active, active_style, key_style)
        width = self.size.width or 80
        for packed in (False, True):
            line, ranges = self._strip(active, active_style, key_style, packed)
            if line.cell_len <= width:
                break
        self._ranges = ranges
        self.show(line)

    def _strip(self, active: str, active_style: Style, key_style: Style,
               packed: bool) -> tuple[Text, list[tuple[int, int, str]]]:
        line = Text(" ", no_wrap=True, overflow="ellipsis")
        ranges: list[tuple[int, int, str]] = []
        for pane_id, spec in self.panes.items():
            start = len(line)
            label = Text(f" {spec.key} {spec.short_title if packed else spec.tab_title} ")
            if pane_id == active:
                label.stylize(active_style)
            else:
                label.stylize(key_style, 1, 2)
            line.append_text(label)
            ranges.append((start, len(line), pane_id))
            if not packed:
                line.append(" ")
        return line, ranges

    def on_resize(self, event: events.Resize) -> None:
        if self._last is not None:
            self.draw(*self._last)

    def on_click(self, event: events.Click) -> None:
        for start, end, pane_id in self._ranges:
            if start <= event.x < end:
                self.post_message(self.Clicked(pane_id))
                return
