"""A Static that repaints only when its text really changed.

``Static.update`` always asks for a new layout. At 1 Hz most lines (a source's ``live``, a card
whose numbers did not move) are unchanged, and skipping those keeps an idle console cheap. A
view whose size does not depend on its text (a fixed height, a width that is not ``auto``, as
the one-line status and detail lines of the panes) repaints without a new layout of the screen,
which on a filter keystroke is most of the cost.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from gpuconsole.ui.format import inert_text


class TextView(Static):
    """Static text, updated only on change (Rich Text compares words and styles)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._shown: Text | None = None

    def show(self, text: Text) -> None:
        """Show ``text``, its control characters spelled out (its words come from data)."""
        text = inert_text(text)
        if self._shown is not None and text == self._shown:
            return
        self._shown = text
        width, height = self.styles.width, self.styles.height
        sized = (width is None or not width.is_auto) and height is not None and not height.is_auto
        self.update(text, layout=not sized)
