"""A Static that repaints only when its text really changed.

``Static.update`` always asks for a new layout. At 1 Hz most lines (a source's ``live``, a card
whose numbers did not move) are unchanged, and skipping those keeps an idle console cheap.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


class TextView(Static):
    """Static text, updated only on change (Rich Text compares words and styles)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._shown: Text | None = None

    def show(self, text: Text) -> None:
        if self._shown is not None and text == self._shown:
            return
        self._shown = text
        self.update(text)
