"""A bounded, searchable log: lines rendered on demand, the oldest dropped past a limit.

Only the lines on screen are rendered (the line API), so a full buffer of 5,000 lines costs the
same to repaint as a short one. The view follows new lines while it is scrolled to the end, and
stays where the user put it otherwise (as ``less +F`` does).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable

from rich.cells import cell_len
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpuconsole.ui.format import inert

MAX_LINES = 5000
END_TRIES = 20  # scrolls to the end tried again while a new view is still being laid out


class LogView(ScrollView, can_focus=True):
    """Log lines with every match of the search highlighted and the current match marked."""

    COMPONENT_CLASSES = {"log-view--match", "log-view--current"}
    DEFAULT_CSS = """
    LogView { height: 1fr; }
    LogView > .log-view--match { background: $warning 40%; }
    LogView > .log-view--current { background: $accent 50%; text-style: bold; }
    """

    def __init__(self, max_lines: int = MAX_LINES, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.lines: deque[str] = deque(maxlen=max_lines)
        self.dropped = 0  # lines dropped from the front so far: line numbers stay absolute
        self._widest = 0
        self.search_text = ""
        self._pattern: re.Pattern[str] | None = None
        self.current: int | None = None  # absolute number of the current match
        self._to_end = True  # a scroll to the end is under way (or the view is new): keep following
        self._end_tries = 0

    # ------------------------------------------------------------------ lines
    @property
    def total(self) -> int:
        """Lines received in all (kept or dropped)."""
        return self.dropped + len(self.lines)

    def append(self, new: Iterable[str]) -> None:
        batch = [inert(line.expandtabs(8)) for line in new]  # a pod's log is anyone's text
        if not batch:
            return
        following = self._to_end or self.scroll_y >= self.max_scroll_y
        limit = self.lines.maxlen or len(batch)
        self.dropped += max(0, len(self.lines) + len(batch) - limit)
        self.lines.extend(batch)
        self._widest = max(self._widest, max(cell_len(line) for line in batch[-limit:]))
        self.virtual_size = Size(self._widest, len(self.lines))
        if following:
            self._to_end = True
            self.scroll_end(animate=False, x_axis=False, on_complete=self._at_end)
        self.refresh()

    def _at_end(self) -> None:
        """The scroll to the end is done, unless the view was laid out (or grew) after the end was
        worked out, as a new view's first lines can be: then it scrolls again, a few times at most."""
        if (self.size.height and self.scroll_y >= self.max_scroll_y) or self._end_tries >= END_TRIES:
            self._to_end = False
            self._end_tries = 0
            return
        self._end_tries += 1
        self.call_after_refresh(self.scroll_end, animate=False, x_axis=False, on_complete=self._at_end)

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.scrollable_content_region.width
        index = scroll_y + y
        base = self.rich_style
        if index >= len(self.lines):
            return Strip.blank(width, base)
        line = self.lines[index]
        text = Text(line, no_wrap=True, end="")
        if self._pattern is not None:
            text.highlight_regex(self._pattern, self.get_component_rich_style("log-view--match"))
            if self.dropped + index == self.current:
                text.stylize(self.get_component_rich_style("log-view--current"))
        strip = Strip(text.render(self.app.console), cell_len(line))
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)

    # ------------------------------------------------------------------ search
    def search(self, words: str) -> None:
        """Highlight ``words`` (case-insensitive); the current match starts over."""
        self.search_text = words
        self._pattern = re.compile(re.escape(words), re.IGNORECASE) if words else None
        self.current = None
        self.refresh()

    def matches(self) -> list[int]:
        """Absolute numbers of the kept lines that match."""
        pattern = self._pattern
        if pattern is None:
            return []
        return [self.dropped + i for i, line in enumerate(self.lines) if pattern.search(line)]

    def next_match(self, step: int = 1) -> tuple[int, int] | None:
        """Move to the next (``step`` 1) or previous (-1) match, wrapping around, and show it.

        Returns ``(position, count)`` (1-based), or None when nothing matches.
        """
        found = self.matches()
        if not found:
            self.current = None
            self.refresh()
            return None
        if self.current is None:
            top = self.dropped + int(self.scroll_y)
            later = [m for m in found if m >= top] if step > 0 else [m for m in found if m <= top + self.size.height]
            target = (later[0] if step > 0 else later[-1]) if later else (found[0] if step > 0 else found[-1])
        elif step > 0:
            target = next((m for m in found if m > self.current), found[0])
        else:
            target = next((m for m in reversed(found) if m < self.current), found[-1])
        self.current = target
        row = target - self.dropped
        self.scroll_to(y=max(0, row - self.size.height // 2), animate=False, immediate=True)
        self.refresh()
        return found.index(target) + 1, len(found)
