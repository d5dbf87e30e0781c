"""The one-line strip of pane names: the active pane highlighted, a click switches.

Lighter than Textual's TabbedContent (a single widget, no per-tab widgets or underline
animation), which keeps the first frame quick; the number keys are the main way to switch.
"""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual import events
from textual.message import Message

from gpuconsole.ui.widgets.text_view import TextView


class PaneTabs(TextView):
    """``1 Overview  2 GPUs  3 Jobs  4 Instances  5 Budgets  6 Audit``."""

    class Clicked(Message):
        """The user clicked a pane's name."""

        def __init__(self, pane_id: str) -> None:
            super().__init__()
            self.pane_id = pane_id

    def __init__(self, panes: dict[str, tuple[str, str]], **kwargs: object) -> None:
        """``panes``: id → (title, number key), in tab order (:data:`gpuconsole.ui.panes.registry.PANES`)."""
        super().__init__(**kwargs)
        self.panes = panes
        self._ranges: list[tuple[int, int, str]] = []

    def draw(self, active: str, active_style: Style, key_style: Style) -> None:
        line = Text(" ", no_wrap=True, overflow="ellipsis")
        self._ranges = []
        for pane_id, (title, key) in self.panes.items():
            start = len(line)
            label = Text(f" {key} {title} ")
            if pane_id == active:
                label.stylize(active_style)
            else:
                label.stylize(key_style, 1, 2)
            line.append_text(label)
            self._ranges.append((start, len(line), pane_id))
            line.append(" ")
        self.show(line)

    def on_click(self, event: events.Click) -> None:
        for start, end, pane_id in self._ranges:
            if start <= event.x < end:
                self.post_message(self.Clicked(pane_id))
                return
