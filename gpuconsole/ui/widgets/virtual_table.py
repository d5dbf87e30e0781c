"""The console's one keyed table: it holds the ordered row keys and a function that makes a
row's cells, and draws only the rows on screen, so 100,000 rows cost one key each.

Rows come and go by key, the cursor stays on its key, and ``RowHighlighted`` / ``RowSelected``
say which key. :class:`~gpuconsole.ui.widgets.live_table.LiveTable` is the same table drawn as
Textual's ``DataTable`` draws (the small tables); :class:`RowIndex` sorts and filters a
snapshot's items for a big one.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Sequence
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from gpuconsole.ui.widgets.cells import Cells, Row

CellsOf = Callable[[str], Cells]

PADDING = 1  # blank cells either side of each column, as DataTable draws them
FLEX_MIN = 24  # the width the one flexible column gets at least


class VirtualTable(ScrollView, can_focus=True):
    """Ordered row keys plus a cell function; only the visible rows are ever built."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"datatable--header", "datatable--cursor"}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "first", "First", show=False),
        Binding("end", "last", "Last", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        # less, vim, k9s and htop habits beside the arrows
        Binding("j", "cursor_down", "Down", show=False),
        Binding("k", "cursor_up", "Up", show=False),
        Binding("g", "first", "First", show=False),
        Binding("G", "last", "Last", show=False),
    ]
    DEFAULT_CSS = """
    VirtualTable {
        height: 1fr;
        background: $surface;
        color: $foreground;
        & > .datatable--header { text-style: bold; background: $panel; color: $foreground; }
        &:ansi > .datatable--header { background: ansi_bright_blue; color: ansi_default; }
        & > .datatable--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
        &:focus {
            background-tint: $foreground 5%;
            & > .datatable--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
    }
    """

    class RowHighlighted(Message):
        """The cursor moved to another row (named like DataTable's, for the panes)."""

        def __init__(self, table: VirtualTable, cursor_row: int, row_key: str | None) -> None:
            super().__init__()
            self.data_table = table
            self.cursor_row = cursor_row
            self.row_key = row_key

        @property
        def control(self) -> VirtualTable:
            return self.data_table

    class RowSelected(RowHighlighted):
        """Enter, or a second click, on a row."""

    def __init__(self, columns: Sequence[tuple[str, str, int | None]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._column_spec = list(columns)
        self._column_index = {key: i for i, (_label, key, _w) in enumerate(self._column_spec)}
        self._keys: list[str] = []
        self._position: dict[str, int] | None = None  # key -> row, built when first asked
        self._cells_of: CellsOf = lambda key: ()
        self._cursor = 0
        self._widths: list[int] = []

    # ------------------------------------------------------------------ rows
    def show_rows(self, keys: Sequence[str], cells_of: CellsOf) -> None:
        """Show the rows ``keys`` in this order; ``cells_of(key)`` makes a row when it is drawn."""
        selected = self.selected_key
        arrived = not self._keys and bool(keys)
        self._keys = keys if isinstance(keys, list) else list(keys)
        self._position = None
        self._cells_of = cells_of
        cursor = self._cursor
        if selected is not None:
            index = self.row_index(selected)
            if index is not None:
                cursor = index
        self._set_cursor(min(cursor, max(0, len(self._keys) - 1)), scroll=False, announce=cursor != self._cursor)
        if arrived and cursor == self._cursor:  # the first rows: a row is highlighted now
            self.post_message(self.RowHighlighted(self, self._cursor, self.selected_key))
        self._update_virtual_size()
        self.refresh()

    def sync(self, rows: Sequence[Row]) -> None:
        """Show exactly ``rows`` (``(key, cells)`` in order)."""
        cells = dict(rows)
        self.show_rows([key for key, _cells in rows], cells.__getitem__)

    @property
    def shown_keys(self) -> list[str]:
        """Row keys in display order."""
        return list(self._keys)

    @property
    def row_count(self) -> int:
        return len(self._keys)

    def row_index(self, key: str) -> int | None:
        if self._position is None:
            self._position = {k: i for i, k in enumerate(self._keys)}
        return self._position.get(key)

    def set_labels(self, labels: dict[str, str]) -> None:
        """Rename columns by key (e.g. to mark the sort column); the widths stay as set."""
        spec = [(labels.get(key, label), key, width) for label, key, width in self._column_spec]
        if spec != self._column_spec:
            self._column_spec = spec
            self.refresh_line(0)

    def column_label(self, key: str) -> str:
        return self._column_spec[self._column_index[key]][0]

    def get_cell(self, key: str, column: str) -> Any:
        """The cell of row ``key`` in column ``column`` (as it would be drawn now)."""
        if self.row_index(key) is None:
            raise KeyError(key)
        return self._cells_of(key)[self._column_index[column]]

    # ------------------------------------------------------------------ cursor
    @property
    def cursor_row(self) -> int:
        return self._cursor

    @property
    def selected_key(self) -> str | None:
        if not self._keys or not 0 <= self._cursor < len(self._keys):
            return None
        return self._keys[self._cursor]

    def move_cursor(self, *, row: int | None = None, column: int | None = None, animate: bool = False,
                    scroll: bool = True) -> None:
        if row is not None:
            self._set_cursor(row, scroll=scroll)

    def _set_cursor(self, row: int, *, scroll: bool = True, announce: bool = True) -> None:
        row = max(0, min(row, len(self._keys) - 1)) if self._keys else 0
        moved = row != self._cursor
        if moved:
            self.refresh_row(self._cursor)
            self._cursor = row
            self.refresh_row(row)
        if scroll:
            self._scroll_to_cursor()
        if (moved and announce) and self._keys:
            self.post_message(self.RowHighlighted(self, row, self.selected_key))

    def refresh_row(self, row: int) -> None:
        y = row - round(self.scroll_y) + 1
        if 1 <= y < self.size.height:
            self.refresh_line(y)

    def _page(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _scroll_to_cursor(self) -> None:
        top = round(self.scroll_y)
        page = self._page()
        if self._cursor < top:
            self.scroll_to(y=self._cursor, animate=False, immediate=True)
        elif self._cursor >= top + page:
            self.scroll_to(y=self._cursor - page + 1, animate=False, immediate=True)

    def action_cursor_up(self) -> None:
        self._set_cursor(self._cursor - 1)

    def action_cursor_down(self) -> None:
        self._set_cursor(self._cursor + 1)

    def action_page_up(self) -> None:
        self._set_cursor(self._cursor - self._page())

    def action_page_down(self) -> None:
        self._set_cursor(self._cursor + self._page())

    def action_first(self) -> None:
        self._set_cursor(0)

    def action_last(self) -> None:
        self._set_cursor(len(self._keys) - 1)

    def action_select_cursor(self) -> None:
        if self._keys:
            self.post_message(self.RowSelected(self, self._cursor, self.selected_key))

    async def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y < 1:
            return
        row = round(self.scroll_y) + offset.y - 1
        if row >= len(self._keys):
            return
        self._set_cursor(row)
        if event.chain >= 2:
            self.action_select_cursor()

    def on_focus(self, event: events.Focus) -> None:
        self.refresh()

    def on_blur(self, event: events.Blur) -> None:
        self.refresh()

    # ------------------------------------------------------------------ drawing
    def on_resize(self, event: events.Resize) -> None:
        self._update_virtual_size()

    def _update_virtual_size(self) -> None:
        fixed = sum(w for _l, _k, w in self._column_spec if w is not None)
        pads = 2 * PADDING * len(self._column_spec)
        flexible = [i for i, (_l, _k, w) in enumerate(self._column_spec) if w is None]
        spare = max(FLEX_MIN, self.scrollable_content_region.width - fixed - pads)
        self._widths = [w if w is not None else (spare if i == flexible[0] else len(label))
                        for i, (label, _k, w) in enumerate(self._column_spec)]
        self._set_virtual_size(Size(sum(self._widths) + pads, len(self._keys) + 1))

    def _set_virtual_size(self, size: Size) -> None:
        """Set the scrollable size. ``virtual_size`` asks for a layout of the whole screen on any
        change; when only the number of rows changed and the vertical scrollbar stays as it was
        (shown, or not needed, before and after), the scrollbar is updated in place instead, which
        on a filter keystroke saves a layout pass of every widget on screen."""
        old = self.virtual_size
        if size == old:
            return
        rows = self.container_size.height
        if (self.is_mounted and rows > 0 and size.width == old.width
                and (size.height > rows) == (old.height > rows)):
            self.set_reactive(VirtualTable.virtual_size, size)
            self._update_scrollbar(size)
            self.refresh()
            return
        self.virtual_size = size

    def _update_scrollbar(self, size: Size) -> None:
        """The vertical scrollbar for ``size`` (whether it shows does not change)."""
        if self.show_vertical_scrollbar and self.styles.scrollbar_size_vertical:
            bar = self.vertical_scrollbar
            bar.window_virtual_size = size.height
            bar.window_size = self.container_size.height - self.scrollbar_size_horizontal
            bar.refresh()
        self.scroll_y = self.validate_scroll_y(self.scroll_y)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if not self._widths:
            self._update_virtual_size()
        scroll_x = round(self.scroll_x)
        if y == 0:
            header = self.get_component_rich_style("datatable--header")
            cells: Sequence[Any] = [Text(label, no_wrap=True) for label, _k, _w in self._column_spec]
            return self._strip(cells, base + header, None).crop_extend(scroll_x, scroll_x + width, base + header)
        row = round(self.scroll_y) + y - 1
        if row >= len(self._keys):
            return Strip.blank(width, base)
        cursor = self.get_component_rich_style("datatable--cursor") if row == self._cursor else None
        cells = self._cells_of(self._keys[row])
        line_style = base + cursor if cursor is not None else base
        return self._strip(cells, base, cursor).crop_extend(scroll_x, scroll_x + width, line_style)

    def _strip(self, cells: Sequence[Any], base: Style, over: Style | None) -> Strip:
        """One row: each cell cut or padded to its column, DataTable's padding either side."""
        console = self.app.console
        segments: list[Segment] = []
        pad = Segment(" " * PADDING, base + over if over is not None else base)
        for cell, width in zip(cells, self._widths, strict=False):
            content = cell.copy() if isinstance(cell, Text) else Text(str(cell), no_wrap=True)
            content.truncate(width, overflow="ellipsis")
            room = width - content.cell_len
            if room > 0:
                if content.justify == "right":
                    content.pad_left(room)
                else:
                    content.pad_right(room)
            segments.append(pad)
            for segment in content.render(console, end=""):
                style = base + segment.style if segment.style else base
                segments.append(Segment(segment.text, style + over if over is not None else style))
            segments.append(pad)
        return Strip(segments)


INCREMENTAL_SHARE = 8  # a new reading is merged into the last order when under 1/8 of it changed


class RowIndex:
    """A snapshot's items sorted for a table, found by key, with their filter words.

    Rebuilt only when the snapshot hands over a new tuple of items, and then each item's filter
    words are reused while the item itself is the same object, so a filter keystroke over
    100,000 rows is one pass of substring tests over strings made once. When most items are the
    same objects as in the last tuple, they keep their order and only the others are placed
    (rows whose order keys are equal then keep the order they had).
    """

    def __init__(self, key: Callable[[Any], str], order: Callable[[Any], Any], words: Callable[[Any], Sequence[object]]) -> None:
        self._key, self._order, self._words_of = key, order, words
        self._items: tuple[Any, ...] | None = None
        self.by_key: dict[str, Any] = {}
        self._ordered: list[str] = []  # the keys in table order
        self._order_keys: list[Any] = []  # order(item) of each key of ``_ordered``
        self._words: dict[str, tuple[Any, str]] = {}
        self._last: tuple[str, object, list[str]] = ("", None, [])  # the last filter asked for and its keys

    @property
    def ordered(self) -> list[Any]:
        """The items in table order."""
        by_key = self.by_key
        return [by_key[k] for k in self._ordered]

    def update(self, items: tuple[Any, ...]) -> None:
        if items is self._items:
            return
        self._items = items
        key = self._key
        by_key = {key(item): item for item in items}
        previous = self.by_key
        changed = [k for k, item in by_key.items() if previous.get(k) is not item]
        added = sum(1 for k in changed if k not in previous)
        removed = len(previous) + added - len(by_key)
        if previous and (len(changed) + removed) * INCREMENTAL_SHARE < len(by_key):
            self._merge(by_key, previous, changed, removed)
        else:
            self._sort(by_key)
        self.by_key = by_key

    def _words_for(self, item: Any) -> tuple[Any, str]:
        return item, " ".join(str(w) for w in self._words_of(item) if w is not None).lower()

    def _sort(self, by_key: dict[str, Any]) -> None:
        order = self._order
        orders = {k: order(item) for k, item in by_key.items()}
        self._ordered = sorted(by_key, key=orders.__getitem__)
        self._order_keys = [orders[k] for k in self._ordered]
        old, words = self._words, {}
        for k, item in by_key.items():
            cached = old.get(k)
            words[k] = cached if cached is not None and cached[0] is item else self._words_for(item)
        self._words = words

    def _merge(self, by_key: dict[str, Any], previous: dict[str, Any], changed: list[str], removed: int) -> None:
        """Most rows are the very objects of the last reading (a big cluster's finished jobs):
        they keep their places; the rows that went or changed are taken out and the new or
        changed ones placed, instead of sorting every row again."""
        order = self._order
        ordered, orders, words = list(self._ordered), list(self._order_keys), dict(self._words)
        gone = [k for k in previous if k not in by_key] if removed else []
        for k in (*gone, *(k for k in changed if k in previous)):
            at = bisect.bisect_left(orders, order(previous[k]))
            while ordered[at] != k:  # past rows of an equal order key
                at += 1
            del ordered[at]
            del orders[at]
            del words[k]
        for k in changed:
            item = by_key[k]
            item_order = order(item)
            at = bisect.bisect_right(orders, item_order)
            ordered.insert(at, k)
            orders.insert(at, item_order)
            words[k] = self._words_for(item)
        self._ordered, self._order_keys, self._words = ordered, orders, words

    def keys(self, filter_text: str = "") -> list[str]:
        """The keys in table order whose words hold every term of ``filter_text``.

        Typing narrows: a text that extends the last one asked for (``train-00`` after
        ``train-0``) can only match rows the last one matched, so only those are tested.
        """
        if not filter_text:
            return list(self._ordered)
        text = filter_text.lower()
        last_text, last_words, last_keys = self._last
        if last_words is self._words and last_text and text.startswith(last_text):
            candidates: Iterable[str] = last_keys
        else:
            candidates = self._ordered
        words = self._words
        terms = text.split()
        if len(terms) == 1:
            term = terms[0]
            found = [key for key in candidates if term in words[key][1]]
        else:
            found = [key for key in candidates if all(term in words[key][1] for term in terms)]
        self._last = (text, words, found)
        return list(found)
